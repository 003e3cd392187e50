"""REST API conventions shared by every app: the error shape, permissions, conflicts."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from rest_framework import authentication, exceptions, status
from rest_framework.response import Response

from amux_common import roles

_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "throttled",
}


class Conflict(exceptions.APIException):
    """409: the request is well formed but contradicts the current state."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


# The role rule lives in amux_common.roles; kept importable here for settings and apps.
OperatorOrReadOnly = roles.OperatorOrReadOnly


def _message(detail) -> str:
    if isinstance(detail, list):
        return "; ".join(_message(d) for d in detail)
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_message(v)}" for k, v in detail.items())
    return str(detail)


def flat_fields(detail, prefix: str = "") -> dict[str, list[str]]:
    """Every fault by its path: an object's member by name, a list's item by its index,
    joined with dots (`quota.limit`, `items.2.name`), each with its list of messages.

    DRF nests the faults of a nested serializer (a dict), of a list of objects (a list
    holding one entry per item, empty for a good one) and of a list field's items (a dict
    keyed by index); one flat shape lets a client find a field's faults by one lookup,
    whatever the depth."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            path = str(key) if not prefix else (
                prefix if key == "non_field_errors" else f"{prefix}.{key}")
            _merge(out, flat_fields(value, path))
    elif isinstance(detail, list) and any(isinstance(v, (dict, list)) for v in detail):
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                _merge(out, flat_fields(value, f"{prefix}.{index}" if prefix else str(index)))
            else:
                _merge(out, {prefix: [str(value)]})
    elif isinstance(detail, list):
        if detail:
            out[prefix] = [str(v) for v in detail]
    elif detail is not None and detail != "":
        out[prefix] = [str(detail)]
    return out


def _merge(into: dict[str, list[str]], more: dict[str, list[str]]) -> None:
    for key, messages in more.items():
        into.setdefault(key, []).extend(messages)


def _fields(detail) -> dict:
    if isinstance(detail, dict):
        return flat_fields({k: v for k, v in detail.items() if k != "non_field_errors"})
    return {}


def error_response(status_code: int, code: str, message: str, fields: dict | None = None):
    return Response(
        {"error": {"code": code, "message": message, "fields": flat_fields(fields or {})}},
        status=status_code,
    )


def exception_handler(exc, context):
    """Every API error is `{"error": {"code", "message", "fields"}}`."""
    if isinstance(exc, ValidationError):
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    detail = exc.detail if isinstance(exc, exceptions.APIException) else response.data
    code = getattr(exc, "default_code", None) or _CODES.get(response.status_code, "error")
    if isinstance(exc, exceptions.APIException) and isinstance(detail, exceptions.ErrorDetail):
        code = detail.code or code
    if isinstance(exc, exceptions.ValidationError):
        code = "invalid"
        fields = _fields(detail)
        message = _message(detail.get("non_field_errors", detail)) if isinstance(
            detail, dict
        ) else _message(detail)
    else:
        fields = {}
        message = _message(detail)
    response.data = {"error": {"code": code, "message": message, "fields": fields}}
    return response


def bearer_token(request, what: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header: None for another scheme
    (the next authentication class decides); a malformed one is refused naming ``what``."""
    header = authentication.get_authorization_header(request).split()
    if not header or header[0].lower() != b"bearer":
        return None
    if len(header) != 2:
        raise exceptions.AuthenticationFailed(f"Authorization must be 'Bearer <{what}>'.")
    try:
        return header[1].decode()
    except UnicodeError:
        raise exceptions.AuthenticationFailed("the token is not valid text") from None
