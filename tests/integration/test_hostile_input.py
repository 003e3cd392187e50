"""Input any client can send never gets a 500: bodies nested too deep or too large, and
websockets to unknown paths or from another origin, against the real ASGI app under
uvicorn (what `amux run` serves), anonymous and authenticated."""

from __future__ import annotations

import logging

import httpx
import pytest
import websockets

from intake.models import Source
from intake.sources.github import GitHub
from tests.support.asgi_thread import AsgiThread
from tests.support.runtimes import run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

DEEP = b"[" * 100_000
DEEP_OBJECT = b'{"a":' * 5_000 + b"1" + b"}" * 5_000


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


def error_of(response) -> dict:
    assert response.headers["content-type"].startswith("application/json"), response.text[:300]
    return response.json()["error"]


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize("path", ["/hooks/lark/lk", "/hooks/github/gh"])
def test_a_webhook_body_nested_too_deep_is_a_400_not_a_500(amux, sources, path, body, caplog):
    caplog.set_level(logging.ERROR)
    response = httpx.post(amux.url + path, content=body, timeout=30,
                          headers={"Content-Type": "application/json",
                                   "X-GitHub-Event": "issues", "X-GitHub-Delivery": "d1",
                                   "X-Hub-Signature-256": "sha256=00"})
    assert response.status_code in (400, 401), response.text[:300]
    assert response.status_code < 500
    assert not [r for r in caplog.records if "RecursionError" in r.getMessage()
                or (r.exc_info and r.exc_info[0] is RecursionError)]


@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT], ids=["array", "object"])
def test_an_api_body_nested_too_deep_is_a_400_in_the_error_shape(amux, operator_token, body):
    response = httpx.post(amux.url + "/api/v1/goals/", content=body, timeout=30,
                          headers={"Content-Type": "application/json",
                                   "Authorization": f"Token {operator_token}"})
    assert response.status_code == 400, response.text[:300]
    error = error_of(response)
    assert error["code"] == "parse_error" and "deep" in error["message"]


def test_an_api_body_over_the_limit_is_a_413_in_the_error_shape(amux, operator_token,
                                                                settings):
    body = b'{"slug": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
    response = httpx.post(amux.url + "/api/v1/goals/", content=body, timeout=60,
                          headers={"Content-Type": "application/json",
                                   "Authorization": f"Token {operator_token}"})
    assert response.status_code == 413, response.text[:300]
    error = error_of(response)
    assert error["code"] == "too_large" and str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in (
        error["message"].replace(",", ""))


def _ws(url: str, **headers):
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


def test_a_websocket_to_an_unknown_path_is_closed_quietly(amux, caplog):
    caplog.set_level(logging.ERROR)
    answer = _ws(amux.url.replace("http", "ws") + "/ws/nothing-here/")
    assert answer in (403, 404, 4404), answer
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records]


def test_a_websocket_origin_with_another_scheme_is_refused(amux):
    port = amux.url.rsplit(":", 1)[1]
    answer = _ws(amux.url.replace("http", "ws") + "/ws/sessions/1/timeline/",
                 Origin=f"https://127.0.0.1:{port}")
    assert answer == 403


def test_a_websocket_host_outside_the_allowed_hosts_is_refused(amux):
    answer = _ws(amux.url.replace("http", "ws") + "/ws/sessions/1/timeline/", Host="evil.example")
    assert answer in (400, 403)


def test_a_signed_lark_source_checks_the_signature_before_it_parses(amux, sources):
    lark = Source.objects.get(slug="lk")
    lark.secrets = {**lark.secrets, "encrypt_key": "k"}
    lark.save()
    response = httpx.post(amux.url + "/hooks/lark/lk", content=b"not json at all", timeout=30,
                          headers={"Content-Type": "application/json",
                                   "X-Lark-Signature": "0" * 64,
                                   "X-Lark-Request-Timestamp": "1",
                                   "X-Lark-Request-Nonce": "n"})
    # 401, not the 400 of a body that is not JSON: the body was never parsed
    assert response.status_code == 401, response.text
    assert error_of(response)["code"] == "not_authenticated"
