"""The webhook endpoints (`/hooks/<kind>/<slug>`, with or without the trailing slash) as
the real server answers them: straight from ASGI (amux_common/plain_asgi.py), not through
Django's handler, which cost four times what verifying and storing a delivery costs.
What is answered is exactly what the Django views (intake/views.py) answer: both call
intake/receive.py. A path that names no webhook goes on to Django (its JSON 404)."""

from __future__ import annotations

import re

from amux_common import plain_asgi
from intake.receive import receive, refused_unread, too_large
from intake.sources.base import MAX_BODY

# the same slugs Django's <slug:…> converter takes, so both ways route the same paths
_PATH = re.compile(r"/hooks/(github|lark)/([-a-zA-Z0-9_]+)/?")


def hook_of(path: str) -> tuple[str, str] | None:
    """(kind, slug) of a webhook path, or None."""
    found = _PATH.fullmatch(path)
    return (found[1], found[2]) if found else None


async def answer(scope, receive_message, send) -> None:
    kind, slug = hook_of(scope["path"])
    headers = plain_asgi.headers_of(scope)
    if not plain_asgi.host_allowed(headers):
        await plain_asgi.send_json(send, plain_asgi.error(
            400, "invalid_host", "the Host header names a host this server does not serve "
            "(AMUX_ALLOWED_HOSTS)"))
        return
    refused = refused_unread(scope["method"], headers.get("content-length"))
    if refused is not None:
        await plain_asgi.send_json(send, refused)
        return
    try:
        body = await plain_asgi.read_body(receive_message, MAX_BODY)
    except plain_asgi.Disconnected:
        return
    if body is None:
        await plain_asgi.send_json(send, too_large())
        return
    await plain_asgi.send_json(send, await plain_asgi.in_thread(receive, kind, slug, headers,
                                                                body))
