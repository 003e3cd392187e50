"""Error pages: under /api/ and /hooks/ an error is JSON in the API's error shape (a path that
matches no route is still an API answer), elsewhere Django's pages."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from django.views import defaults

_MACHINE_PREFIXES = ("/api/", "/hooks/")


def for_machines(path: str) -> bool:
    """Whether an error at ``path`` is answered as JSON in the API's error shape."""
    return path.startswith(_MACHINE_PREFIXES)


def too_large_message() -> str:
    return f"the request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes"


def too_large_text() -> str:
    """The 413's plain-text page, for people's pages."""
    return too_large_message().capitalize() + "."


def _json(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, "fields": {}}},
                        status=status)


def not_found(request, exception=None):
    if for_machines(request.path):
        return _json(404, "not_found", f"nothing is found at {request.path}")
    return defaults.page_not_found(request, exception)


def bad_request(request, exception=None):
    """A request Django refused before any view (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, a
    suspicious header): 413 for a body too large, 400 otherwise; JSON for machines."""
    if isinstance(exception, RequestDataTooBig):
        if for_machines(request.path):
            return _json(413, "too_large", too_large_message())
        return HttpResponse(too_large_text(), status=413,
                            content_type="text/plain; charset=utf-8")
    if for_machines(request.path):
        return _json(400, "bad_request", "the request was refused before it was read "
                                         "(a malformed or suspicious request)")
    return defaults.bad_request(request, exception)


def server_error(request):
    if for_machines(request.path):
        return _json(500, "server_error", "the server failed; the error is logged")
    return defaults.server_error(request)
