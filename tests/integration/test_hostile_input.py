"""Input any client can send never gets a 500 or a traceback: bodies nested too deep or too
large (declared or streamed), and websockets to unknown paths, from another origin or for
another host — against the real ASGI app under uvicorn (what `amux run` serves), anonymous
and authenticated, and the webhooks through Django's own handler too (WSGI, the test
client)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket

import httpx
import pytest
import websockets

from intake.models import Delivery, Source
from intake.sources.github import GitHub, sign
from tests.support.asgi_thread import AsgiThread
from tests.support.runtimes import run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

DEEP = b"[" * 100_000
DEEP_OBJECT = b'{"a":' * 5_000 + b"1" + b"}" * 5_000
JUST_TOO_DEEP = b"[" * 65 + b"]" * 65  # parses; one level past amux's bound


@pytest.fixture
def amux(settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    with AsgiThread() as server:
        yield server


@pytest.fixture
def sources(db):
    github = Source(kind="github", slug="gh", name="gh",
                    config=GitHub.validate_config({"repo": ["octo/app"]}))
    github.secrets = {"webhook_secret": "s", "token": "t"}
    github.save()
    lark = Source.objects.create(kind="lark", slug="lk", name="lk",
                                 config={"domain": "https://open.feishu.cn",
                                         "app_id": "cli_x", "groups": ["oc_a"]})
    lark.secrets = {"app_secret": "x", "verification_token": "v", "encrypt_key": ""}
    lark.save()


@pytest.fixture
def operator_token(operator):
    from knox.models import AuthToken

    return AuthToken.objects.create(user=operator)[1]


@pytest.fixture
def quiet(caplog):
    """Fails the test if anything logged a traceback or an error while it ran."""
    caplog.set_level(logging.INFO)
    yield caplog
    loud = [f"{r.name}: {r.getMessage()[:200]}" for r in caplog.records
            if r.exc_info or r.levelno >= logging.ERROR]
    assert not loud, loud


def error_of(response) -> dict:
    assert response.headers["content-type"].startswith("application/json"), response.text[:300]
    return response.json()["error"]


def _hook_headers(**extra) -> dict[str, str]:
    return {"Content-Type": "application/json", "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": "d1", **extra}


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT, JUST_TOO_DEEP],
                         ids=["array", "object", "65-levels"])
def test_a_webhook_body_nested_too_deep_is_a_400_in_the_error_shape(amux, sources, body,
                                                                    quiet):
    # Lark without an encrypt key: the verification token is inside the body, so the body
    # is parsed first, within the bound
    lark = httpx.post(amux.url + "/hooks/lark/lk", content=body, timeout=30,
                      headers=_hook_headers())
    assert lark.status_code == 400, lark.text[:300]
    assert error_of(lark)["code"] == "invalid"
    assert "nested deeper than 64 levels" in error_of(lark)["message"]
    # GitHub signs the raw body: a forged one is refused before it is parsed ...
    forged = httpx.post(amux.url + "/hooks/github/gh", content=body, timeout=30,
                        headers=_hook_headers(**{"X-Hub-Signature-256": "sha256=00"}))
    assert forged.status_code == 401
    assert error_of(forged)["code"] == "not_authenticated"
    # ... and a signed one is parsed within the bound
    signed = httpx.post(amux.url + "/hooks/github/gh", content=body, timeout=30,
                        headers=_hook_headers(**{"X-Hub-Signature-256": sign("s", body)}))
    assert signed.status_code == 400, signed.text[:300]
    assert "nested deeper than 64 levels" in error_of(signed)["message"]
    assert not Delivery.objects.exists()


def test_a_webhook_body_nested_too_deep_is_a_400_through_django_too(client, sources, quiet):
    response = client.post("/hooks/lark/lk/", data=DEEP, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_a_signed_lark_source_checks_the_signature_before_it_parses(amux, sources, quiet):
    lark = Source.objects.get(slug="lk")
    lark.secrets = {**lark.secrets, "encrypt_key": "k"}
    lark.save()
    for body in (b"not json at all", DEEP):
        response = httpx.post(amux.url + "/hooks/lark/lk", content=body, timeout=30,
                              headers={"Content-Type": "application/json",
                                       "X-Lark-Signature": "0" * 64,
                                       "X-Lark-Request-Timestamp": "1",
                                       "X-Lark-Request-Nonce": "n"})
        # 401, not the 400 of a body that is not JSON: the body was never parsed
        assert response.status_code == 401, response.text
        assert error_of(response)["code"] == "not_authenticated"


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT, JUST_TOO_DEEP],
                         ids=["array", "object", "65-levels"])
def test_an_api_body_nested_too_deep_is_a_400_in_the_error_shape(amux, operator_token, body,
                                                                 quiet):
    response = httpx.post(amux.url + "/api/v1/goals/", content=body, timeout=30,
                          headers={"Content-Type": "application/json",
                                   "Authorization": f"Token {operator_token}"})
    assert response.status_code == 400, response.text[:300]
    error = error_of(response)
    assert error["code"] == "parse_error"
    assert "nested deeper than 64 levels" in error["message"]


def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the answer to bytes sent as they are (the server may
    answer before it has read them all)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < int(
                    _headers(answer).get("content-length", "0")):
                part = sock.recv(65536)
                if not part:
                    break
                answer += part
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), _headers(answer), body


def _headers(answer: bytes) -> dict[str, str]:
    lines = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _chunked(path: str, body: bytes, token: str = "") -> bytes:
    chunk = 1 << 20
    parts = [body[i:i + chunk] for i in range(0, len(body), chunk)]
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Token {token}\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + (
        b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n")


def test_an_api_body_over_the_limit_is_a_413_in_the_error_shape(amux, operator_token,
                                                                settings, quiet):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = (f"POST /api/v1/goals/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nAuthorization: Token {operator_token}\r\n"
                f"Content-Length: {30 << 20}\r\n\r\n").encode()
    streamed = _chunked("/api/v1/goals/", b'{"slug": "' + b"x" * limit + b'"}', operator_token)
    for request in (declared, streamed):
        status, headers, body = _raw(amux.port, request)
        assert status == 413, body[:300]
        assert headers["content-type"] == "application/json"
        error = json.loads(body)["error"]
        assert error["code"] == "too_large"
        assert f"{limit:,}" in error["message"]
    # anonymous, to a page: refused the same, as text
    status, headers, body = _raw(amux.port, _chunked("/panel/login/", b"x" * (limit + 1)))
    assert (status, headers["content-type"]) == (413, "text/plain; charset=utf-8")
    assert f"{limit:,}" in body.decode()


def test_a_chunked_api_body_within_the_limit_is_read(amux, operator_token, quiet):
    status, _, body = _raw(amux.port, _chunked(
        "/api/v1/goals/", b'{"slug": "chunked", "title": "Sent chunked"}', operator_token))
    assert status == 201, body[:300]
    assert json.loads(body)["slug"] == "chunked"


def _ws(url: str, **headers):
    """The handshake's HTTP status when refused, else the close code the server sent."""
    async def go():
        try:
            async with websockets.connect(url, additional_headers=headers,
                                          open_timeout=10) as ws:
                await ws.recv()
        except websockets.exceptions.InvalidStatus as refused:
            return refused.response.status_code
        except websockets.exceptions.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
        return None

    return run_async(go())


def test_a_websocket_to_an_unknown_path_is_closed_4404_quietly(amux, operator_token, quiet):
    for headers in ({}, {"Authorization": f"Token {operator_token}"}):
        assert _ws(amux.url.replace("http", "ws") + "/ws/nothing-here/", **headers) == 4404
    said = [r for r in quiet.records if r.name == "amux_site.routing"]
    assert [r.getMessage() for r in said] == [
        "websocket to an unknown path refused: /ws/nothing-here/"] * 2
    assert all(r.levelno == logging.INFO for r in said)


def test_a_websocket_origin_must_match_scheme_host_and_port(amux, quiet):
    port = amux.port
    timeline = amux.url.replace("http", "ws") + "/ws/sessions/1/timeline/"
    for origin in (f"https://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}",
                   f"http://localhost:{port}", "null"):
        assert _ws(timeline, Origin=origin) == 403, origin
    # amux's own origin passes the check (then the consumer wants a signed-in user)
    assert _ws(timeline, Origin=f"http://127.0.0.1:{port}") == 403
    assert _ws(amux.url.replace("http", "ws") + "/ws/nothing/",
               Origin=f"http://127.0.0.1:{port}") == 4404


def test_a_websocket_host_outside_the_allowed_hosts_is_refused(amux, quiet):
    unknown = amux.url.replace("http", "ws") + "/ws/nothing/"
    assert _ws(unknown, Host="evil.example") == 403
    assert _ws(unknown, Host=f"localhost:{amux.port}") == 4404


def test_mcp_bodies_too_deep_or_too_large_are_refused_in_the_error_shape(
        settings, operator_token, quiet):
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    headers = {"Authorization": f"Bearer {operator_token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    with AsgiThread(lifespan="on") as server:
        deep = httpx.post(server.url + "/mcp", content=DEEP, headers=headers, timeout=30)
        assert deep.status_code == 400, deep.text[:300]
        assert error_of(deep)["code"] == "parse_error"
        huge = httpx.post(server.url + "/mcp", headers=headers, timeout=60,
                          content=b"[" + b" " * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + b"]")
        assert huge.status_code == 413
        assert error_of(huge)["code"] == "too_large"
        # a body within the bounds is the SDK's, as before
        listed = httpx.post(server.url + "/mcp", headers=headers, timeout=30, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert listed.status_code == 200, listed.text[:300]
        assert listed.json()["result"]["tools"]
