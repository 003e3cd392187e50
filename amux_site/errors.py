"""Error pages: under /api/ and /hooks/ an error is JSON in the API's error shape (a path that
matches no route is still an API answer), elsewhere Django's pages."""

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views import defaults

_MACHINE_PREFIXES = ("/api/", "/hooks/")


def _json(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, "fields": {}}},
                        status=status)


def not_found(request, exception=None):
    if request.path.startswith(_MACHINE_PREFIXES):
        return _json(404, "not_found", f"nothing is found at {request.path}")
    return defaults.page_not_found(request, exception)


def bad_request(request, exception=None):
    """A request Django refused before any view (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, a
    suspicious header): 413 for a body too large, 400 otherwise; JSON for machines."""
    from django.conf import settings

    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if request.path.startswith(_MACHINE_PREFIXES):
            return _json(413, "too_large", f"the request body is over {limit:,} bytes")
        return _too_large_page(limit)
    if request.path.startswith(_MACHINE_PREFIXES):
        return _json(400, "bad_request", "the request was refused before it was read "
                                         "(a malformed or suspicious request)")
    return defaults.bad_request(request, exception)


def _too_large_page(limit: int):
    from django.http import HttpResponse

    return HttpResponse(f"Request body over {limit:,} bytes.", status=413,
                        content_type="text/plain; charset=utf-8")


def server_error(request):
    if request.path.startswith(_MACHINE_PREFIXES):
        return _json(500, "server_error", "the server failed; the error is logged")
    return defaults.server_error(request)
