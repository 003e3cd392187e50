"""Who may open the timeline websocket: programs with an API token in a header or
subprotocol (never the URL), browsers with the session cookie from amux's own origin —
host *and* port."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.test import Client
from knox.models import AuthToken

from sessions import services
from sessions.new_session import Launch
from tests.support.asgi import AsgiServer
from tests.support.runtimes import run_async
from tests.support.workers import worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def token(operator):
    return AuthToken.objects.create(user=operator)[1]


@pytest.fixture
def sid(openai_provider, session_dirs):
    return services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                 model="gpt-5.5")).pk


def _scope(sid, headers, query=b"after=0", subprotocols=()):
    from amux_site.asgi import channels_app

    path = f"/ws/sessions/{sid}/timeline"
    return ApplicationCommunicator(channels_app, {
        "type": "websocket", "path": path, "raw_path": path.encode(), "query_string": query,
        "scheme": "ws", "headers": [(k.encode(), v.encode()) for k, v in headers],
        "subprotocols": list(subprotocols), "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000)})


async def _open(comm) -> dict:
    """The first message the server sends: the accept (with its subprotocol) or the close."""
    await comm.send_input({"type": "websocket.connect"})
    first = await comm.receive_output(10)
    if first["type"] == "websocket.accept":
        snapshot = json.loads((await comm.receive_output(10))["text"])
        assert snapshot["type"] == "snapshot"
        await comm.send_input({"type": "websocket.disconnect", "code": 1000})
        await comm.wait(10)
    return first


def _accepted(sid, headers, **kw) -> dict | None:
    first = run_async(_open(_scope(sid, headers, **kw)))
    return first if first["type"] == "websocket.accept" else None


HOST = ("host", "127.0.0.1:8000")


def test_a_program_authenticates_with_a_header_and_needs_no_origin(sid, token):
    assert _accepted(sid, [HOST, ("authorization", f"Token {token}")])
    assert not _accepted(sid, [HOST, ("authorization", "Token " + "0" * 64)])
    assert not _accepted(sid, [HOST])


def test_a_program_may_authenticate_with_a_subprotocol_never_echoed(sid, token):
    accept = _accepted(sid, [HOST], subprotocols=["amux", f"amux.token.{token}"])
    assert accept and accept["subprotocol"] == "amux"


def test_a_token_in_the_url_is_refused(sid, token):
    assert not _accepted(sid, [HOST], query=f"after=0&token={token}".encode())


def _cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def test_a_browser_signs_in_with_its_session_from_amux_s_own_origin_only(sid, viewer):
    cookie = ("cookie", _cookie(viewer))
    assert _accepted(sid, [HOST, cookie, ("origin", "http://127.0.0.1:8000")])
    # another web application on the same machine: same host, another port
    assert not _accepted(sid, [HOST, cookie, ("origin", "http://127.0.0.1:3000")])
    assert not _accepted(sid, [HOST, cookie, ("origin", "http://evil.example:8000")])
    assert not _accepted(sid, [HOST, cookie, ("origin", "null")])
    assert not _accepted(sid, [("host", "127.0.0.1"), cookie, ("origin", "http://127.0.0.1:8000")])
    # the default port is the scheme's: http://127.0.0.1 is port 80, not 8000
    assert not _accepted(sid, [HOST, cookie, ("origin", "http://127.0.0.1")])
    assert _accepted(sid, [("host", "localhost"), cookie, ("origin", "http://localhost")])
    # behind the TLS proxy: https://host (443) reached through X-Forwarded-Proto
    assert _accepted(sid, [("host", "localhost"), cookie, ("x-forwarded-proto", "https"),
                           ("origin", "https://localhost")])


def test_a_token_with_a_foreign_origin_is_refused(sid, token):
    assert not _accepted(sid, [HOST, ("authorization", f"Token {token}"),
                               ("origin", "http://127.0.0.1:3000")])


def test_no_log_line_holds_the_token(sid, token, session_dirs, tmp_path):
    """The web server logs every websocket it opens (path and query included): with the token
    in a header, none of those lines holds it — and a ?token= URL is refused."""
    log = tmp_path / "uvicorn.log"
    server = AsgiServer(worker_env(session_dirs), log=log, log_level="debug")
    try:
        async def main():
            url = f"{server.ws_url}/ws/sessions/{sid}/timeline?after=0"
            async with websockets.connect(url, open_timeout=10, additional_headers={
                    "Authorization": f"Token {token}"}) as ws:
                assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "snapshot"
            with pytest.raises((websockets.exceptions.InvalidStatus,
                                websockets.exceptions.ConnectionClosed)):
                async with websockets.connect(url + "&token=not-a-real-token",
                                              open_timeout=10) as ws:
                    await asyncio.wait_for(ws.recv(), 10)

        run_async(main())
    finally:
        server.stop()
    text = log.read_text()
    assert f"/ws/sessions/{sid}/timeline" in text  # the lines were written
    assert token not in text
    assert "not-a-real-token" not in text  # even a refused URL token is not written


def test_redaction_covers_headers_subprotocols_and_queries():
    from amux_site.log_redaction import redact

    for line in ("< authorization: Token abc123def", "{'Authorization': 'Bearer abc123def'}",
                 "[(b'authorization', b'Token abc123def')]", "GET /ws?after=1&token=abc123def",
                 "< sec-websocket-protocol: amux, amux.token.abc123def"):
        assert "abc123def" not in redact(line), line
