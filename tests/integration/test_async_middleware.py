"""Under ASGI the site's own middleware runs on the event loop (amux_common/request_hooks):
the chain Django builds has no sync-only link, and each middleware still does its job when
called the async way (a path without its slash, a NUL refused, a static file served)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.test import AsyncClient
from django.utils.module_loading import import_string

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_middleware_can_run_async():
    sync_only = [path for path in settings.MIDDLEWARE
                 if not getattr(import_string(path), "async_capable", False)]
    assert sync_only == [], "each would cost every request two more thread crossings"
    ASGIHandler()  # builds the chain the async way without complaint


def test_the_async_chain_does_what_the_sync_one_does():
    async_to_sync(_through_the_async_chain)()


async def _through_the_async_chain():
    client = AsyncClient()
    assert (await client.get("/robots.txt")).status_code == 200  # a route without a slash
    response = await client.post("/hooks/github/nobody", b"{}", content_type="application/json")
    assert response.status_code == 404  # resolved with its slash: the hook answers
    assert response.json()["error"]["code"] == "not_found"
    nul = await client.get("/api/v1/sessions/1/timeline/?after=%00")
    assert nul.status_code == 400 and nul.json()["error"]["code"] == "invalid"
    static = await client.get("/static/amux/panel.css")
    assert static.status_code == 200 and static["Content-Type"].startswith("text/css")
