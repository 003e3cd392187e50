"""NUL characters are refused at the API's door.

PostgreSQL cannot store U+0000 in text or jsonb: a NUL that reached the database would be a
500. No real client sends one, so a body, path or query string holding one is a 400 before
any view runs — the same on SQLite, so tests there see what production sees.
"""

from __future__ import annotations

from django.http import JsonResponse
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from amux_common import bounded_json
from amux_common.request_hooks import RequestHook

NUL_MESSAGE = "NUL characters (U+0000) are not accepted"


def holds_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_nul(v) for v in value)
    return False


class NulFreeJSONParser(JSONParser):
    """DRF's JSON parser, bounded in depth (amux_common.bounded_json) and refusing NUL."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = bounded_json.check(super().parse(stream, media_type, parser_context))
        except (RecursionError, bounded_json.TooDeep):
            raise ParseError(f"the JSON body is nested deeper than {bounded_json.MAX_DEPTH} "
                             "levels") from None
        if holds_nul(data):
            raise ParseError(f"{NUL_MESSAGE} in the body")
        return data


class RefuseNulMiddleware(RequestHook):
    """400 for an /api/ request whose path or query string holds a NUL."""

    def before(self, request):
        if request.path.startswith("/api/") and (
            "\x00" in request.path
            or any(holds_nul(v) for _k, values in request.GET.lists() for v in [_k, *values])
        ):
            return JsonResponse({"error": {"code": "invalid", "message": NUL_MESSAGE,
                                           "fields": {}}}, status=400)
        return None
