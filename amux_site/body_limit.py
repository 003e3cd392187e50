"""Request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE refused before Django reads them.

Django's ASGI handler reads a whole body, unbounded (to a temporary file past 2.5 MB),
before any middleware or view can look at it; the limit is checked only when a view reads
``request.body``. A body sent chunked, with no Content-Length, is worse: DRF takes it for
empty and never reads it, so anyone could make the server write gigabytes to disk for a
400. Here a declared length over the limit is a 413 before a byte is read, and a chunked
body is read up to the limit (413 past it) and handed on with its Content-Length, so DRF
reads it like any other. The 413 is JSON in the API's error shape under /api/ and /hooks/
(amux_site.errors), plain text elsewhere.
"""

from __future__ import annotations

from django.conf import settings

from amux_common import plain_asgi
from amux_site import errors


class BodyLimit:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if scope["type"] != "http" or limit is None:
            return await self.application(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > limit:
                return await _too_large(scope, send)
        elif b"transfer-encoding" in headers:
            try:
                body = await plain_asgi.read_body(receive, limit)
            except plain_asgi.Disconnected:
                return None
            if body is None:
                return await _too_large(scope, send)
            scope = {**scope, "headers": [*scope["headers"],
                                          (b"content-length", str(len(body)).encode())]}
            receive = plain_asgi.replaying(body, receive)
        return await self.application(scope, receive, send)


async def _too_large(scope, send) -> None:
    if errors.for_machines(scope["path"]):
        await plain_asgi.send_json(send, plain_asgi.error(413, "too_large",
                                                          errors.too_large_message()))
        return
    body = errors.too_large_text().encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
