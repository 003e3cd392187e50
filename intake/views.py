"""Webhook endpoints (`/hooks/<kind>/<slug>`) as Django views: verify → store → answer
(intake/receive.py). The real server answers these paths below Django (intake/hooks_asgi.py);
these serve Django's own handlers (the test client, WSGI) the same way."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from intake.receive import receive, refused_unread, too_large


def _hook(kind: str):
    @csrf_exempt
    def view(request, slug):
        answer = refused_unread(request.method, request.headers.get("Content-Length"))
        if answer is None:
            try:
                body = request.body
            except RequestDataTooBig:
                answer = too_large()
            else:
                answer = receive(kind, slug, dict(request.headers), body)
        code, payload = answer
        return JsonResponse(payload, status=code)

    view.__name__ = f"{kind}_hook"
    return view


github_hook = _hook("github")
lark_hook = _hook("lark")
