"""Error pages: under /api/ and /hooks/ an error is JSON in the API's error shape (a path that
matches no route is still an API answer), elsewhere Django's pages."""

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


def server_error(request):
    if request.path.startswith(_MACHINE_PREFIXES):
        return _json(500, "server_error", "the server failed; the error is logged")
    return defaults.server_error(request)
