"""Webhook endpoints (`/hooks/<kind>/<slug>`): verify → store → answer (intake/receive.py)."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from intake.receive import receive
from intake.sources.base import MAX_BODY


def _hook(kind: str):
    @csrf_exempt
    def view(request, slug):
        if request.method != "POST":
            return JsonResponse(
                {"error": {"code": "method_not_allowed", "message": "use POST", "fields": {}}},
                status=405,
            )
        try:
            length = int(request.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY:
            return JsonResponse(
                {"error": {"code": "too_large", "message": "the body is larger than 25 MiB",
                           "fields": {}}}, status=413)
        try:
            body = request.body
        except RequestDataTooBig:
            return JsonResponse(
                {"error": {"code": "too_large", "message": "the body is larger than 25 MiB",
                           "fields": {}}}, status=413)
        code, payload = receive(kind, slug, dict(request.headers), body)
        return JsonResponse(payload, status=code)

    view.__name__ = f"{kind}_hook"
    return view


github_hook = _hook("github")
lark_hook = _hook("lark")
