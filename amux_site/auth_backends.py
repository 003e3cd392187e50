"""Login lockout (django-axes) for every web login: the panel's and the admin's."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend


class LockoutBackend(AxesStandaloneBackend):
    """Refuses a locked-out web login. A login with no request (the shell, a management
    command, a test client's `login()`) is not a web login: it has no address to lock, so
    this backend steps aside and the next one decides."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
