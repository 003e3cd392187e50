"""Channels consumers on pooled connections: timeline websockets under the real ASGI
server read their snapshots through database_sync_to_async from a bounded pool."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from tests.support.asgi import AsgiServer
from tests.support.pg_activity import Sampled, postgres_only
from tests.support.runtimes import run_async
from tests.support.workers import worker_env


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_timeline_websockets_read_through_a_bounded_pool(openai_provider, session_dirs, operator,
                                                         tmp_path):
    """Channels consumers (database_sync_to_async) borrow and give back like requests do."""
    from knox.models import AuthToken

    from sessions import new_session, services, timeline

    token = AuthToken.objects.create(user=operator)[1]
    session = services.create_session(
        new_session.Launch.direct(runtime="codex", provider="scripted", model="gpt-5.5"))
    for i in range(3):
        timeline.note(session.pk, "error", {"code": f"e{i}", "message": ""})

    async def viewer(server):
        async with websockets.connect(
                f"{server.ws_url}/ws/sessions/{session.pk}/timeline?after=0", open_timeout=30,
                origin=server.url, additional_headers={"Authorization": f"Token {token}"}) as ws:
            snapshot = json.loads(await asyncio.wait_for(ws.recv(), 30))
            events = [json.loads(await asyncio.wait_for(ws.recv(), 30)) for _ in range(4)]
            return snapshot["type"], [e["seq"] for e in events]

    async def viewers(server):
        return await asyncio.gather(*(viewer(server) for _ in range(24)))

    with Sampled() as sampled:
        server = AsgiServer(worker_env(session_dirs, AMUX_DB_POOL_SIZE="3"),
                            log=tmp_path / "uvicorn.log")
        try:
            results = run_async(viewers(server))
        finally:
            server.stop()
    assert results == [("snapshot", [1, 2, 3, 4])] * 24
    assert 1 <= sampled.peak <= 3, sampled.peak
    assert len(sampled.seen) <= 3, sampled.seen
