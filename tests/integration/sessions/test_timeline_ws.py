"""WS /ws/sessions/<id>/timeline?after=<seq>: snapshot, live events, and a reconnect with no
gap and no duplicate — over the real Redis channel layer."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from channels.db import database_sync_to_async
from django.db import transaction

from sessions import services, timeline
from sessions.models import Session
from sessions.new_session import Launch
from tests.support.asgi import AsgiServer
from tests.support.runtimes import run_async
from tests.support.workers import worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def server(session_dirs, tmp_path):
    srv = AsgiServer(worker_env(session_dirs), log=tmp_path / "uvicorn.log")
    yield srv
    srv.stop()


@pytest.fixture
def token(operator):
    from knox.models import AuthToken

    return AuthToken.objects.create(user=operator)[1]


async def _connect(server, session_id, token, after=0):
    comm = await websockets.connect(f"{server.ws_url}/ws/sessions/{session_id}/timeline"
                                    f"?after={after}", open_timeout=10, origin=server.url,
                                    additional_headers={"Authorization": f"Token {token}"})
    snapshot = json.loads(await asyncio.wait_for(comm.recv(), 10))
    assert snapshot["type"] == "snapshot"
    return comm, snapshot


async def _receive(comm, count):
    return [json.loads(await asyncio.wait_for(comm.recv(), 10)) for _ in range(count)]


async def _nothing(comm, timeout=0.3):
    try:
        await asyncio.wait_for(comm.recv(), timeout)
    except TimeoutError:
        return True
    return False


def _note(session_id, n, prefix="e"):
    for i in range(n):
        timeline.note(session_id, "error", {"code": f"{prefix}{i}", "message": ""})


def test_snapshot_live_and_resume_without_gap_or_duplicate(openai_provider, session_dirs,
                                                           token, server):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    sid = session.pk
    _note(sid, 3)  # seq 2..4 after session.created (1)

    async def main():
        comm, snap = await _connect(server, sid, token)
        assert snap["session"]["lifecycle"] == "created" and snap["session"]["last_seq"] == 4
        first = await _receive(comm, 4)
        assert [e["seq"] for e in first] == [1, 2, 3, 4]
        await database_sync_to_async(_note)(sid, 2, "live")
        live = await _receive(comm, 2)
        assert [e["seq"] for e in live] == [5, 6]
        assert live[0]["payload"]["code"] == "live0" and live[0]["type"] == "error"
        await comm.close()
        # events while the client is away
        await database_sync_to_async(_note)(sid, 3, "away")
        comm, _ = await _connect(server, sid, token, after=6)
        replay = await _receive(comm, 3)
        assert [e["seq"] for e in replay] == [7, 8, 9]
        await database_sync_to_async(_note)(sid, 1, "again")
        assert [e["seq"] for e in await _receive(comm, 1)] == [10]
        assert await _nothing(comm)
        await comm.close()

    run_async(main())


def test_a_published_jump_is_filled_from_the_database(openai_provider, session_dirs, token,
                                                     server):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    sid = session.pk

    def store_quietly(n):
        with transaction.atomic():
            writer = timeline.Writer(Session.objects.select_for_update().get(pk=sid))
            for i in range(n):
                writer.append("error", {"code": f"quiet{i}"})
            writer.flush()  # stored, not published
            return list(writer.published)

    async def main():
        comm, _ = await _connect(server, sid, token)
        assert [e["seq"] for e in await _receive(comm, 1)] == [1]
        stored = await database_sync_to_async(store_quietly)(3)
        # only the last of the three is published (as if the others' messages were late)
        await database_sync_to_async(timeline.publish)(sid, stored[-1:])
        got = await _receive(comm, 3)
        assert [e["seq"] for e in got] == [2, 3, 4]
        # the late messages arrive after all: nothing is sent twice
        await database_sync_to_async(timeline.publish)(sid, stored[:2])
        assert await _nothing(comm)
        await comm.close()

    run_async(main())


def test_anonymous_and_unknown_sessions_are_refused(openai_provider, session_dirs, token,
                                                    server):
    auth = None
    async def refused(url):
        try:
            headers = {"Authorization": auth} if auth else {}
            comm = await websockets.connect(url, open_timeout=10, origin=server.url,
                                            additional_headers=headers)
        except websockets.exceptions.InvalidStatus:
            return True
        try:
            await asyncio.wait_for(comm.recv(), 5)
        except websockets.exceptions.ConnectionClosed:
            return True
        return False

    async def main():
        nonlocal auth
        assert await refused(f"{server.ws_url}/ws/sessions/1/timeline")
        auth = f"Token {token}"
        assert await refused(f"{server.ws_url}/ws/sessions/999999/timeline")

    run_async(main())


# --------------------------------------------------------------- fan-out in one process
def _group_subscribers(session_id: int) -> int:
    """Redis subscriptions to the session's timeline group, over every process."""
    import redis
    from django.conf import settings

    prefix = settings.CHANNEL_LAYERS[settings.TIMELINE_LAYER]["CONFIG"]["prefix"]
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        name = f"{prefix}__group__{timeline.group_name(session_id)}"
        return dict(client.pubsub_numsub(name))[name.encode()]
    finally:
        client.close()


def test_a_process_subscribes_once_per_session_and_unsubscribes_after_its_last_client(
        openai_provider, session_dirs, token, server):
    sid = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                model="gpt-5.5")).pk

    async def main():
        clients = [(await _connect(server, sid, token))[0] for _ in range(3)]
        for comm in clients:
            assert [e["seq"] for e in await _receive(comm, 1)] == [1]
        await database_sync_to_async(_note)(sid, 1)
        for comm in clients:
            assert [e["seq"] for e in await _receive(comm, 1)] == [2]
        assert await database_sync_to_async(_group_subscribers)(sid) == 1
        for comm in clients:
            await comm.close()
        for _ in range(250):  # the server unsubscribes once it has seen the last close
            if await database_sync_to_async(_group_subscribers)(sid) == 0:
                break
            await asyncio.sleep(0.02)
        assert await database_sync_to_async(_group_subscribers)(sid) == 0
        # a later client subscribes again
        comm, _ = await _connect(server, sid, token, after=2)
        await database_sync_to_async(_note)(sid, 1, "later")
        assert [e["seq"] for e in await _receive(comm, 1)] == [3]
        await comm.close()

    run_async(main())


def test_another_redis_database_s_timeline_is_not_received(openai_provider, session_dirs,
                                                           token, server):
    """Pub/sub ignores Redis database numbers: an installation on another database of the
    same server publishes under its own prefix, and this one's clients do not see it."""
    from channels_redis.pubsub import RedisPubSubChannelLayer
    from django.conf import settings

    sid = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                model="gpt-5.5")).pk
    other = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix="amux-db99")
    foreign = {"seq": 2, "turn": None, "type": "error", "payload": {"code": "foreign"},
               "at": "2026-01-01T00:00:00+00:00"}

    async def main():
        comm, _ = await _connect(server, sid, token)
        assert [e["seq"] for e in await _receive(comm, 1)] == [1]
        await other.group_send(timeline.group_name(sid), timeline.group_message([foreign]))
        assert await _nothing(comm)
        await database_sync_to_async(_note)(sid, 1, "ours")
        got = await _receive(comm, 1)
        assert got[0]["seq"] == 2 and got[0]["payload"]["code"] == "ours0"
        await comm.close()
        await other.flush()

    run_async(main())


def test_a_client_far_behind_is_caught_up_from_the_database(openai_provider, session_dirs,
                                                            token):
    """More published batches than a client's queue holds while it is not reading: the
    queue's overflow is dropped and the client gets the rest from the database — each event
    once, in order."""
    from asgiref.testing import ApplicationCommunicator

    from amux_site.asgi import channels_app
    from sessions import consumers, fanout

    overflow = consumers.INBOX_LIMIT + 3  # the real limit, overrun by three batches
    sid = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                model="gpt-5.5")).pk

    def store_quietly(n):
        with transaction.atomic():
            writer = timeline.Writer(Session.objects.select_for_update().get(pk=sid))
            for i in range(n):
                writer.append("error", {"code": f"quiet{i}"})
            writer.flush()
            return list(writer.published)

    async def main():
        path = f"/ws/sessions/{sid}/timeline"
        comm = ApplicationCommunicator(channels_app, {
            "type": "websocket", "path": path, "raw_path": path.encode(),
            "query_string": b"after=0", "scheme": "ws",
            "headers": [(b"host", b"127.0.0.1"), (b"origin", b"http://127.0.0.1"),
                        (b"authorization", f"Token {token}".encode())],
            "subprotocols": [], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)})
        await comm.send_input({"type": "websocket.connect"})
        assert (await comm.receive_output(10))["type"] == "websocket.accept"

        async def seqs(n):
            return [json.loads((await comm.receive_output(10))["text"])["seq"]
                    for _ in range(n)]

        assert json.loads((await comm.receive_output(10))["text"])["type"] == "snapshot"
        assert await seqs(1) == [1]
        stored = await database_sync_to_async(store_quietly)(overflow)
        (client,) = fanout.hub().feeds[sid].subscribers
        for event in stored:  # the feed hands over every batch before the client runs
            client.offer(fanout.frames(sid, [event]))
        assert await seqs(overflow) == list(range(2, overflow + 2))
        assert await comm.receive_nothing(0.3)
        await comm.send_input({"type": "websocket.disconnect", "code": 1000})
        await comm.wait(10)
        assert sid not in fanout.hub().feeds

    run_async(main())


def test_a_frame_over_the_bound_closes_the_connection_quietly(openai_provider, session_dirs,
                                                             token, server, tmp_path):
    from amux_site.operations import WS_MAX_FRAME

    sid = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                model="gpt-5.5")).pk

    async def main():
        comm, _ = await _connect(server, sid, token)
        await comm.send("x" * 1000)  # ignored: the timeline takes no commands
        await asyncio.wait_for(await comm.ping(), 10)  # and the connection stays open
        await comm.send("x" * (WS_MAX_FRAME + 1))
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            while True:  # past the events the snapshot is followed by, to the close
                await asyncio.wait_for(comm.recv(), 10)
        return closed.value.rcvd.code

    assert run_async(main()) == 1009  # message too big
    assert "Traceback" not in (tmp_path / "uvicorn.log").read_text()
