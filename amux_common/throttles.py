"""API throttles (DRF): per account and per anonymous address, rates in settings
(REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]), history in the cache (Redis): no database
write per request. A throttled request is 429 in the JSON error shape with Retry-After."""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class _SettingsRate(SimpleRateThrottle):
    """Reads its rate when asked (DRF binds it at import), so a changed setting applies."""

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class AccountRateThrottle(_SettingsRate):
    """Requests per signed-in account (token or session alike)."""

    scope = "account"

    def get_cache_key(self, request, view):
        user = request.user
        if not (user and user.is_authenticated):
            return None
        # an account, not a number: an id reused after a deletion starts afresh
        pk = getattr(user, "pk", None)
        if pk is None:  # an assignment acting through the executor's tools
            ident = str(user)
        else:
            joined = getattr(user, "date_joined", None)
            ident = f"{pk}.{int(joined.timestamp() * 1e6) if joined else 0}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AnonymousRateThrottle(_SettingsRate):
    """Requests per address from anyone not signed in."""

    scope = "anonymous"

    def get_cache_key(self, request, view):
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
