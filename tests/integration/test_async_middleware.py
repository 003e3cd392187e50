"""Under ASGI the site's own middleware runs on the event loop (amux_common/request_hooks):
the chain Django builds has no sync-only link, and each middleware still does its job when
called the async way (a path without its slash, a NUL refused, a static file served);
none of these requests reaches the database."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.test import AsyncClient
from django.utils.module_loading import import_string


def test_every_middleware_can_run_async():
    sync_only = [path for path in settings.MIDDLEWARE
                 if not getattr(import_string(path), "async_capable", False)]
    assert sync_only == [], "each would cost every request two more thread crossings"
    ASGIHandler()  # builds the chain the async way without complaint


def test_the_async_chain_does_what_the_sync_one_does():
    # a loop of its own, in a thread of its own: whatever an earlier test left in this
    # thread's event loop state does not matter
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _through_the_async_chain()).result(120)


async def _through_the_async_chain():
    client = AsyncClient()
    assert (await client.get("/robots.txt")).status_code == 200  # a route without a slash
    missing = await client.get("/api/v1/nowhere")
    assert missing.status_code == 404
    root = await client.get("/api/v1")  # resolved with its slash: the API answers, not a 404
    assert root.status_code in (401, 403), root.status_code
    nul = await client.get("/api/v1/sessions/1/timeline/?after=%00")
    assert nul.status_code == 400 and nul.json()["error"]["code"] == "invalid"
    static = await client.get("/static/amux/panel.css")
    assert static.status_code == 200 and static["Content-Type"].startswith("text/css")
