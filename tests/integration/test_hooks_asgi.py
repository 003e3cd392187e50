"""Webhooks as the real server answers them: below Django's handler (intake/hooks_asgi.py),
under uvicorn, with the same answers the Django views give (tests/integration/test_intake*)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import urllib.error
import urllib.request

import pytest

from amux_common import plain_asgi
from tests.support.asgi import AsgiServer
from tests.support.github_payloads import example, signed
from tests.support.runtimes import run_async
from tests.support.workers import worker_env

SECRET = "hooks-secret"


@pytest.fixture
def server(tmp_path):
    from intake.models import Source
    from intake.sources.github import GitHub

    source = Source(kind="github", slug="asgi-gh", name="asgi",
                    config=GitHub.validate_config({"repo": ["Codertocat/Hello-World"]}))
    source.secrets = {"webhook_secret": SECRET, "token": "unused"}
    source.save()
    running = AsgiServer(worker_env(tmp_path), log=tmp_path / "uvicorn.log")
    yield running
    running.stop()


def _post(url: str, body: bytes, headers: dict[str, str], method: str = "POST"):
    request = urllib.request.Request(url, data=body if method == "POST" else None,
                                     method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read()), refused.headers


def _delivery(issue: int, secret: str = SECRET, delivery: str | None = None):
    payload = example("issue_comment", "created")
    payload["comment"]["id"] = 70_000 + issue
    payload["issue"]["number"] = issue
    body, django_headers = signed("issue_comment", payload, secret, delivery)
    headers = {"Content-Type": "application/json",
               **{k[5:].replace("_", "-"): v for k, v in django_headers.items()}}
    return body, headers


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_signed_delivery_is_stored_once_with_or_without_the_trailing_slash(server):
    from intake.models import Delivery

    body, headers = _delivery(1, delivery="asgi-delivery-1")
    status, answer, response_headers = _post(f"{server.url}/hooks/github/asgi-gh", body,
                                             headers)
    assert (status, answer["delivery"], answer["outcome"]) == (202, "asgi-delivery-1",
                                                               "queued")
    assert response_headers["Content-Type"] == "application/json"
    assert response_headers["X-Content-Type-Options"] == "nosniff"
    status, answer, _ = _post(f"{server.url}/hooks/github/asgi-gh/", body, headers)
    assert (status, answer) == (200, {"duplicate": True, "delivery": "asgi-delivery-1"})
    stored = Delivery.objects.get(delivery_id="asgi-delivery-1")
    assert bytes(stored.body) == body
    assert stored.event == "issue_comment"
    assert stored.headers["x-github-delivery"] == "asgi-delivery-1"
    assert stored.mailbox.startswith("asgi-gh:")


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_refusals_are_json_in_the_api_error_shape_and_store_nothing(server):
    from intake.models import Delivery

    body, headers = _delivery(2)
    url = f"{server.url}/hooks/github/asgi-gh"

    status, answer, _ = _post(url, body, {**headers, "X-Hub-Signature-256": "sha256=00"})
    assert (status, answer["error"]["code"]) == (401, "not_authenticated")
    status, answer, _ = _post(f"{server.url}/hooks/github/nobody", body, headers)
    assert (status, answer["error"]["code"]) == (404, "not_found")
    assert "nobody" in answer["error"]["message"]
    status, answer, _ = _post(url, b"", {}, method="GET")
    assert (status, answer["error"]["code"]) == (405, "method_not_allowed")
    status, answer, _ = _post(url, body, {**headers, "Host": "evil.example"})
    assert (status, answer["error"]["code"]) == (400, "invalid_host")
    # a path that is no webhook's is Django's to answer: its JSON 404 under /hooks/
    status, answer, _ = _post(f"{server.url}/hooks/github/not.a.slug", body, headers)
    assert (status, answer["error"]["code"]) == (404, "not_found")
    assert not Delivery.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_body_over_the_cap_is_refused_whether_declared_or_streamed(server):
    from intake.models import Delivery

    port = int(server.url.rsplit(":", 1)[1])
    declared = (b"POST /hooks/github/asgi-gh HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Length: 26214401\r\n\r\n")
    assert _raw_status(port, declared) == 413
    # chunked, no length declared: refused once 25 MiB + 1 byte have arrived
    chunk = b"x" * (1024 * 1024)
    streamed = (b"POST /hooks/github/asgi-gh HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
                + (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 26 + b"0\r\n\r\n")
    assert _raw_status(port, streamed) == 413
    assert not Delivery.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_lark_events_are_answered_on_the_same_path(server):
    from intake.models import Delivery, Source
    from intake.sources.lark import Lark
    from tests.support.lark_events import message_event, sealed

    source = Source(kind="lark", slug="asgi-lk", name="Lark", config=Lark.validate_config(
        {"app_id": "cli_test", "bot_open_id": "ou_bot", "groups": ["oc_team"],
         "receive_all": ["oc_team"]}))
    source.secrets = {"verification_token": "v-token", "encrypt_key": "enc-key",
                      "app_secret": "sec"}
    source.save()
    url = f"{server.url}/hooks/lark/asgi-lk/"

    def post(payload):
        body, django_headers = sealed(payload, encrypt_key="enc-key")
        return _post(url, body, {"Content-Type": "application/json", **{
            k[5:].replace("_", "-"): v for k, v in django_headers.items()}})

    status, answer, _ = post({"challenge": "c1", "token": "v-token",
                              "type": "url_verification"})
    assert (status, answer) == (200, {"challenge": "c1"})
    event = message_event(token="v-token", chat_id="oc_team", text="@_user_1 hello",
                          mentions=[("ou_bot", "amux")])
    status, answer, _ = post(event)
    assert (status, answer["delivery"]) == (202, event["header"]["event_id"])
    status, answer, _ = post(event)
    assert (status, answer["duplicate"]) == (200, True)
    assert Delivery.objects.filter(source=source).count() == 1


def _raw_status(port: int, raw: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(raw)  # may be answered before it has read everything
        head = b""
        while b"\r\n" not in head:
            part = sock.recv(4096)
            if not part:
                break
            head += part
    return int(head.split(b" ", 2)[1])


def test_a_failing_handler_is_logged_and_answered_500_in_the_api_error_shape(caplog):
    def failing():
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="amux_common.plain_asgi"):
        status, answer = run_async(plain_asgi.in_thread(failing))
    assert (status, answer["error"]["code"]) == (500, "server_error")
    assert "boom" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_client_gone_before_its_body_came_is_not_answered_nor_counted():
    from intake import hooks_asgi, rejections
    from intake.models import Delivery, Source
    from intake.sources.github import GitHub

    source = Source(kind="github", slug="gone-gh", name="gone",
                    config=GitHub.validate_config({"repo": ["Codertocat/Hello-World"]}))
    source.secrets = {"webhook_secret": SECRET, "token": "unused"}
    source.save()
    body, headers = _delivery(3)
    messages = [{"type": "http.request", "body": body[:100], "more_body": True},
                {"type": "http.disconnect"}]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/hooks/github/gone-gh",
             "headers": [(b"host", b"127.0.0.1"),
                         *((k.lower().encode(), v.encode()) for k, v in headers.items())]}
    run_async(hooks_asgi.answer(scope, receive, send))
    assert sent == []
    assert not Delivery.objects.exists()
    assert rejections.pending(source) == {}
