"""Who may do what: one rule shared by the panel and the REST API.

Two roles. An *operator* changes things (tickets, sources, policy, prompts, sessions, web
chat); a *viewer* reads everything an operator reads and changes nothing. The role is stored
as Django's ``is_staff`` flag (operators are staff, so they may also open the audit admin;
viewers are not): one flag, so there is no second record to drift from it, and every
account made before roles existed keeps the rights it had (``admin`` is a superuser and
staff, so an operator).

The rule itself: any signed-in, active user may read; only operators may change. A few
POST actions only compute an answer (the policy's preview and "try"): they are declared
with :func:`reads_only` (panel) or :class:`AnyRole` (REST), and the role test checks that
they write nothing.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.views.decorators.http import require_safe
from django.views.defaults import permission_denied
from rest_framework import permissions

OPERATOR = "operator"
VIEWER = "viewer"
ROLES = (OPERATOR, VIEWER)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def is_operator(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active
                and (user.is_staff or user.is_superuser))


def role_of(user) -> str | None:
    if not (user and user.is_authenticated and user.is_active):
        return None
    return OPERATOR if is_operator(user) else VIEWER


def may(user, method: str) -> bool:
    """The one rule: signed-in users read, operators change."""
    if role_of(user) is None:
        return False
    return method.upper() in SAFE_METHODS or is_operator(user)


def apply_role(user, role: str) -> None:
    """Set ``user``'s role (not saved)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    user.is_staff = role == OPERATOR
    if role == VIEWER:
        user.is_superuser = False


# --- panel ------------------------------------------------------------------------------

def _refuse(request):
    """403 as a response, not a raised PermissionDenied: Django logs a raised one with its
    traceback, while a refusal is an expected outcome worth one line ("Forbidden: <path>")."""
    reason = PermissionDenied(f"Only operators can do this; {request.user.get_username()!r} "
                              "is a viewer.")
    return permission_denied(request, reason)


def read_page(view):
    """A page that only shows things: every role, GET and HEAD only (a POST is 405)."""

    guarded = login_required(require_safe(view))
    guarded.amux_role_rule = "read_page"
    return guarded


def operator_required(view):
    """A page that exists only to change things (an edit form): operators, every method."""

    @login_required
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not is_operator(request.user):
            return _refuse(request)
        return view(request, *args, **kwargs)

    guarded.amux_role_rule = "operator"
    return guarded


def operator_to_change(view):
    """A page every role reads (GET) and only operators change (POST and the rest)."""

    @login_required
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not may(request.user, request.method):
            return _refuse(request)
        return view(request, *args, **kwargs)

    guarded.amux_role_rule = "operator_to_change"
    return guarded


def reads_only(view):
    """A POST that only computes an answer and stores nothing: every signed-in role."""

    guarded = login_required(view)
    guarded.amux_role_rule = "reads_only"
    return guarded


# --- REST -------------------------------------------------------------------------------

class OperatorOrReadOnly(permissions.BasePermission):
    """Authenticated users read; only operators change things (the default permission)."""

    message = "Only operators can change this; viewers read."

    def has_permission(self, request, view):
        return may(request.user, request.method)


class AnyRole(permissions.IsAuthenticated):
    """A POST that only computes an answer (writes nothing): every signed-in role."""

    reads_only = True
