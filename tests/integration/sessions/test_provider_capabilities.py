"""Provider capability discovery (seed 003, "Provider profile contract"): an explicit probe
of the route's ``GET /models`` over real HTTP to the scripted model server, stored as
versioned evidence; failures are snapshots too; no key anywhere; the Providers page probes
and offers "Use discovered models" as the operator's explicit action."""

from __future__ import annotations

import json
import socket

import pytest
from django.test import Client

from sessions.models import ProviderProbe, ProviderProfile
from tests.support.model_server import ModelServer

pytestmark = pytest.mark.django_db

KEY = "sk-probe-secret-4f1c9e"

ADVERTISING = {"id": "big-model", "object": "model", "context_length": 128000,
               "top_provider": {"max_completion_tokens": 8192},
               "architecture": {"input_modalities": ["text", "image"],
                                "output_modalities": ["text"]},
               "supported_parameters": ["temperature", "tools"]}
CONFLICTING = {"id": "odd-model", "context_window": 1000, "max_input_tokens": 2000,
               "supports_tools": False}


@pytest.fixture
def server():
    with ModelServer(api_key=KEY) as running:
        running.models = ["small-model", ADVERTISING, CONFLICTING, {"object": "no id"}]
        yield running


def _provider(api, base_url, key=KEY, slug="main", platform="openai-compat"):
    response = api.post("/api/v1/providers/", {"slug": slug, "platform": platform,
                                               "base_url": base_url, "api_key": key,
                                               "models": ["small-model"]})
    assert response.status_code == 201, response.content
    return response.json()


def _probe(api, slug="main"):
    response = api.post(f"/api/v1/providers/{slug}/probe")
    assert response.status_code == 201, response.content
    return response.json()


def _no_key_stored_or_answered(*answers):
    for answer in answers:
        assert KEY not in json.dumps(answer)
    for row in ProviderProbe.objects.values():
        assert KEY not in json.dumps(row, default=str)


def test_a_probe_discovers_the_listed_models_and_only_advertised_fields(api, server):
    _provider(api, server.base_url)
    snap = _probe(api)
    assert (snap["provider"], snap["revision"], snap["ok"], snap["outcome"],
            snap["status_code"]) == ("main", 1, True, "ok", 200)
    assert (snap["platform"], snap["base_url"]) == ("openai-compat", server.base_url)
    by_id = {m["id"]: m for m in snap["models"]}
    assert sorted(by_id) == ["big-model", "odd-model", "small-model"]  # no id: skipped
    # nothing advertised: nothing known beyond the id (absent = unknown)
    assert by_id["small-model"] == {"id": "small-model"}
    assert by_id["big-model"] == {"id": "big-model", "context_window": 128000,
                                  "max_output_tokens": 8192,
                                  "input_modalities": ["image", "text"],
                                  "output_modalities": ["text"], "tool_calls": True}
    # two aliases disagreeing on the context window: unknown, and said to conflict
    assert by_id["odd-model"] == {"id": "odd-model", "tool_calls": False,
                                  "conflicts": ["context_window"]}
    assert len(snap["digest"]) == 64 and snap["detail"] == "200: 3 models listed"
    assert server.model_list_requests == 1
    assert api.get("/api/v1/providers/main/capabilities").json() == snap
    assert api.get("/api/v1/providers/main/capabilities/").json() == snap
    provider = api.get("/api/v1/providers/main/").json()
    assert provider["capabilities"] == {"revision": 1, "probed_at": snap["probed_at"],
                                        "ok": True,
                                        "models": ["big-model", "odd-model", "small-model"]}
    # discovery never adds models to the operator's list by itself
    assert provider["models"] == ["small-model"]
    assert ProviderProfile.objects.get(slug="main").model_names == ["small-model"]
    _no_key_stored_or_answered(snap, provider)


def test_revisions_increase_and_the_digest_follows_the_answer(api, server):
    _provider(api, server.base_url)
    first, second = _probe(api), _probe(api)
    assert (first["revision"], second["revision"]) == (1, 2)
    assert first["digest"] == second["digest"]  # an unchanged answer: equal digest
    server.models = ["small-model", "new-model"]
    third = _probe(api)
    assert third["revision"] == 3 and third["digest"] != second["digest"]
    assert [m["id"] for m in third["models"]] == ["new-model", "small-model"]
    assert api.get("/api/v1/providers/main/capabilities").json()["revision"] == 3
    # another provider counts its own revisions
    _provider(api, server.base_url, slug="other")
    assert _probe(api, "other")["revision"] == 1
    assert list(ProviderProbe.objects.filter(provider__slug="main")
                .values_list("revision", flat=True)) == [3, 2, 1]


def test_a_wrong_key_is_a_failed_snapshot_not_authenticated(api, server):
    _provider(api, server.base_url, key="sk-wrong-key-1")
    snap = _probe(api)
    assert (snap["ok"], snap["outcome"], snap["status_code"], snap["models"]) == (
        False, "not_authenticated", 401, [])
    assert snap["detail"] == "401: not authenticated"
    assert "sk-wrong-key-1" not in json.dumps(snap)
    assert "Incorrect API key" not in json.dumps(snap)  # never the raw body
    for row in ProviderProbe.objects.values():
        assert "sk-wrong-key-1" not in json.dumps(row, default=str)
    assert api.get("/api/v1/providers/main/").json()["capabilities"]["ok"] is False


def test_an_unreachable_route_is_a_failed_snapshot(api):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _provider(api, f"http://127.0.0.1:{port}/v1")
    snap = _probe(api)
    assert (snap["ok"], snap["outcome"], snap["status_code"]) == (False, "unreachable", None)
    assert snap["detail"].startswith("unreachable:")
    _no_key_stored_or_answered(snap)


@pytest.mark.parametrize("body", [{"error": "nope"}, {"data": "x"}, ["small-model"]])
def test_an_answer_that_is_not_a_model_list_is_said_so(api, server, body):
    server.models_body = body
    _provider(api, server.base_url)
    snap = _probe(api)
    assert (snap["ok"], snap["outcome"], snap["status_code"], snap["models"]) == (
        False, "not_a_model_list", 200, [])
    assert "check the base URL" in snap["detail"]


def test_an_anthropic_route_is_probed_with_its_own_headers(api, server):
    server.models = [{"id": "claude-test", "type": "model", "display_name": "Claude Test",
                      "max_input_tokens": 200000, "max_tokens": 64000}]
    _provider(api, server.root_url, platform="anthropic-compat")
    snap = _probe(api)
    assert snap["ok"] is True
    assert snap["models"] == [{"id": "claude-test", "context_window": 200000,
                               "max_output_tokens": 64000}]


@pytest.fixture
def anthropic():
    """The stand-in answering GET /v1/models as Anthropic does: x-api-key or 401,
    anthropic-version or 400, and a paged list (two entries a page here)."""
    with ModelServer(api_key=KEY) as running:
        running.anthropic, running.page_max = True, 2
        running.models = [{"id": "claude-a", "type": "model", "display_name": "A",
                           "max_input_tokens": 200000, "max_tokens": 64000},
                          "claude-b", "claude-c", "claude-d", "claude-e"]
        yield running


def test_the_stand_in_is_as_strict_as_anthropic(anthropic):
    import urllib.error
    import urllib.request

    def status(path="/v1/models", **headers):
        request = urllib.request.Request(anthropic.root_url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    version = {"anthropic-version": "2023-06-01"}
    assert status(**version)[0] == 401  # no key
    assert status(**{"x-api-key": "sk-wrong", **version})[0] == 401
    assert status(Authorization=f"Bearer {KEY}", **version)[0] == 401  # not its header
    code, body = status(**{"x-api-key": KEY})  # no anthropic-version
    assert code == 400 and body["error"]["type"] == "invalid_request_error"
    assert status("/models", **{"x-api-key": KEY, **version})[0] == 404
    assert status("/v1/models?limit=1001", **{"x-api-key": KEY, **version})[0] == 400
    code, body = status("/v1/models?after_id=claude-b", **{"x-api-key": KEY, **version})
    assert code == 200
    assert (body["first_id"], body["last_id"], body["has_more"]) == (
        "claude-c", "claude-d", True)


def test_an_anthropic_route_is_probed_page_after_page(api, anthropic):
    _provider(api, anthropic.root_url, platform="anthropic-compat")
    snap = _probe(api)
    assert (snap["ok"], snap["outcome"], snap["status_code"]) == (True, "ok", 200)
    assert [m["id"] for m in snap["models"]] == [
        "claude-a", "claude-b", "claude-c", "claude-d", "claude-e"]
    assert snap["models"][0] == {"id": "claude-a", "context_window": 200000,
                                 "max_output_tokens": 64000}
    assert snap["detail"] == "200: 5 models listed on 3 pages"
    assert anthropic.model_list_queries == [
        {"limit": "1000"}, {"limit": "1000", "after_id": "claude-b"},
        {"limit": "1000", "after_id": "claude-d"}]
    _no_key_stored_or_answered(snap)


def test_an_anthropic_route_whose_pages_loop_or_never_end_is_not_taken_as_a_list(
        api, anthropic):
    from sessions import capabilities

    _provider(api, anthropic.root_url, platform="anthropic-compat")
    anthropic.pages_loop = True  # ignores after_id: the same page, "has_more", forever
    snap = _probe(api)
    assert (snap["ok"], snap["outcome"], snap["models"]) == (False, "paging_failed", [])
    assert "again" in snap["detail"] and anthropic.model_list_requests == 2
    anthropic.pages_loop = False
    anthropic.model_list_requests = 0
    anthropic.page_max = 1  # more pages than the probe follows
    anthropic.models = [f"claude-{n:02d}" for n in range(capabilities.MAX_PAGES + 1)]
    snap = _probe(api)
    assert (snap["ok"], snap["outcome"]) == (False, "paging_failed")
    assert f"after {capabilities.MAX_PAGES} pages" in snap["detail"]
    assert anthropic.model_list_requests == capabilities.MAX_PAGES
    anthropic.models = anthropic.models[:capabilities.MAX_PAGES]  # exactly the bound: ok
    snap = _probe(api)
    assert snap["ok"] is True and len(snap["models"]) == capabilities.MAX_PAGES


def test_an_anthropic_probe_with_a_wrong_key_is_not_authenticated(api, anthropic):
    _provider(api, anthropic.root_url, key="sk-wrong-key-1", platform="anthropic-compat")
    snap = _probe(api)
    assert (snap["ok"], snap["outcome"], snap["status_code"]) == (
        False, "not_authenticated", 401)
    assert "sk-wrong-key-1" not in json.dumps(snap)


def test_never_probed_is_not_probed_and_a_viewer_cannot_probe(api, server, viewer):
    _provider(api, server.base_url)
    missing = api.get("/api/v1/providers/main/capabilities")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_probed"
    assert api.get("/api/v1/providers/main/").json()["capabilities"] is None
    assert api.post("/api/v1/providers/nope/probe").status_code == 404
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=viewer)[1]}")
    assert reader.post("/api/v1/providers/main/probe").status_code == 403
    assert not ProviderProbe.objects.exists()
    assert reader.get("/api/v1/providers/main/capabilities").status_code == 404


def test_the_providers_page_probes_and_uses_discovered_models_on_request(api, server,
                                                                        operator, viewer):
    _provider(api, server.base_url)
    op = Client()
    op.force_login(operator)
    page = op.get("/panel/providers/").content.decode()
    assert 'data-unprobed="main"' in page and 'data-probe="main"' in page
    assert 'data-use-discovered="main"' not in page  # nothing discovered yet
    html = op.post("/panel/providers/main/probe/", follow=True).content.decode()
    assert "probe revision 1: 200: 3 models listed" in html
    assert 'data-revision="1"' in html and "3 models" in html
    for ident in ("big-model", "odd-model", "small-model"):
        assert f"<code>{ident}</code>" in html
    assert 'data-use-discovered="main"' in html
    assert ProviderProfile.objects.get(slug="main").model_names == ["small-model"]
    op.post("/panel/providers/main/use-discovered/", follow=True)
    assert ProviderProfile.objects.get(slug="main").model_names == [
        "big-model", "odd-model", "small-model"]
    # a failed probe shows as such, with the last ok revision still named
    server.api_key = "sk-rotated-elsewhere"
    html = op.post("/panel/providers/main/probe/", follow=True).content.decode()
    assert "probe revision 2 failed (not_authenticated)" in html
    assert "last ok: revision 1, 3 models" in html
    assert KEY not in html
    reader = Client()
    reader.force_login(viewer)
    assert reader.post("/panel/providers/main/probe/").status_code == 403
    assert reader.post("/panel/providers/main/use-discovered/").status_code == 403
    assert 'data-probe="main"' not in reader.get("/panel/providers/").content.decode()
    assert ProviderProbe.objects.count() == 2


def test_a_redirect_is_not_followed_with_the_key(api, server):
    """A route redirecting its /models elsewhere would carry the key along: not followed."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Redirect(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            self.send_response(302)
            self.send_header("Location", f"{server.base_url}/models")
            self.send_header("Content-Length", "0")
            self.end_headers()

    redirecting = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=redirecting.serve_forever, daemon=True).start()
    try:
        _provider(api, f"http://127.0.0.1:{redirecting.server_address[1]}/v1")
        snap = _probe(api)
    finally:
        redirecting.shutdown()
        redirecting.server_close()
    assert (snap["ok"], snap["outcome"], snap["status_code"]) == (False, "not_a_model_list",
                                                                  302)
    assert seen == [f"Bearer {KEY}"]  # asked once, the redirect target never
    assert server.model_list_requests == 0
