"""First run in the panel (issue 12, item 15): the set-up checklist on the empty Tickets
tab, the Providers page with its write-only key and connection test, the Policy tab's
warning while work is admitted and no worker is configured, web chat outcomes, archived
sessions refusing input, the favicon and the Triage tab's title. Real database, real HTTP
(the scripted model server; a closed port)."""

from __future__ import annotations

import re
import socket

import pytest
from django.contrib.auth.models import User

from intake.models import Source
from sessions import services as session_services
from sessions.models import ProviderProfile, Session, Turn
from sessions.new_session import Launch
from tests.support.model_server import ModelServer
from tests.support.sessions import model_server, openai_provider, session_dirs  # noqa: F401
from tickets.models import AgentSettings

pytestmark = pytest.mark.django_db

KEY = "sk-first-run-Very-Secret-0123456789"


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _steps(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-step="([a-z-]+)" class="(done|todo)"', html))


def _add_provider(op, base_url: str, key: str = KEY, slug: str = "main"):
    return op.post("/panel/providers/new/", {
        "slug": slug, "platform": "openai-compat", "base_url": base_url, "api_key": key,
        "models_text": "gpt-5.5\nsmall-model"})


def _open_policy(api, slug: str) -> None:
    current = api.get("/api/v1/policy").json()["version"]
    saved = api.put("/api/v1/policy", {
        "base_version": current, "acceptance": "manual",
        "sources": {slug: {"allowed": ["operator"], "rows": {"direct": {"addressed": True}}}}},
        format="json")
    assert saved.status_code == 200, saved.content


# --- the checklist -------------------------------------------------------------------------

def test_the_checklist_ticks_each_step_as_its_data_appears_then_goes_away(op, api):
    page = op.get("/panel/tickets/").content.decode()
    assert 'id="first-run"' in page
    assert _steps(page) == {"provider": "todo", "agent-settings": "todo", "source": "todo",
                            "policy": "todo"}
    # each step links to where it is done
    for url in ("/panel/providers/", "/panel/settings/agents/", "/panel/sources/",
                "/panel/policy/"):
        assert f'href="{url}"' in page

    assert _add_provider(op, "http://127.0.0.1:9/v1").status_code == 302
    assert _steps(op.get("/panel/tickets/").content.decode())["provider"] == "done"

    saved = op.post("/panel/settings/agents/", {
        "worker_runtime": "codex", "worker_provider": ProviderProfile.objects.get().pk,
        "worker_model": "gpt-5.5", "triage_model": ""})
    assert saved.status_code == 302
    assert _steps(op.get("/panel/tickets/").content.decode()) == {
        "provider": "done", "agent-settings": "done", "source": "todo", "policy": "todo"}

    created = api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
                       format="json")
    assert created.status_code == 201
    assert _steps(op.get("/panel/tickets/").content.decode())["source"] == "done"

    _open_policy(api, "chat")
    page = op.get("/panel/tickets/").content.decode()
    assert 'id="first-run"' not in page and "data-step=" not in page


def test_a_disabled_source_does_not_tick_the_source_step(op):
    Source.objects.create(kind="webchat", slug="off", name="Off", enabled=False)
    assert _steps(op.get("/panel/tickets/").content.decode())["source"] == "todo"


# --- the Providers page --------------------------------------------------------------------

def test_providers_page_is_reachable_from_the_navigation(op):
    for page in ("/panel/sessions/", "/panel/settings/agents/", "/panel/tickets/"):
        assert 'href="/panel/providers/"' in op.get(page).content.decode()
    page = op.get("/panel/providers/")
    assert page.status_code == 200
    assert 'aria-current="page">Sessions<' in page.content.decode()


def test_create_and_edit_keep_the_key_write_only(op):
    response = _add_provider(op, "https://api.example.com/v1/")
    assert response.status_code == 302
    provider = ProviderProfile.objects.get(slug="main")
    assert provider.secrets == {"api_key": KEY}
    assert provider.base_url == "https://api.example.com/v1"
    assert provider.model_names == ["gpt-5.5", "small-model"]

    listing = op.get("/panel/providers/", follow=True).content.decode()
    assert 'data-provider="main"' in listing and ">set<" in listing
    edit = op.get("/panel/providers/main/").content.decode()
    assert 'id="key-state">set<' in edit
    assert 'name="api_key"' in edit and 'type="password"' in edit

    # editing without a key keeps the stored one; the slug cannot change
    response = op.post("/panel/providers/main/", {
        "slug": "renamed", "platform": "anthropic-compat",
        "base_url": "https://api.example.com", "api_key": "", "models_text": "claude"},
        follow=True)
    assert response.status_code == 200
    provider.refresh_from_db()
    assert (provider.slug, provider.platform, provider.secrets["api_key"]) == (
        "main", "anthropic-compat", KEY)
    # a new key replaces it; "remove" clears it
    op.post("/panel/providers/main/", {"platform": "openai-compat",
                                       "base_url": "https://api.example.com/v1",
                                       "api_key": "sk-other"})
    provider.refresh_from_db()
    assert provider.secrets == {"api_key": "sk-other"}
    bodies = [r.content.decode() for r in (
        op.get("/panel/providers/"), op.get("/panel/providers/main/"),
        op.get("/panel/settings/agents/"), op.get("/panel/sessions/"),
        op.get("/panel/tickets/"))]
    assert not any(KEY in b or "sk-other" in b for b in bodies)
    op.post("/panel/providers/main/", {"platform": "openai-compat", "clear_key": "on",
                                       "base_url": "https://api.example.com/v1"})
    provider.refresh_from_db()
    assert provider.secrets == {}
    assert 'id="key-state">not set<' in op.get("/panel/providers/main/").content.decode()


def test_a_refused_form_does_not_echo_the_key(op):
    response = _add_provider(op, "ftp://nowhere", key=KEY)
    assert response.status_code == 400
    html = response.content.decode()
    assert "Enter a valid URL" in html and KEY not in html
    response = _add_provider(op, "https://api.example.com/v1", key="sk-café")
    assert response.status_code == 400
    assert "ASCII" in response.content.decode() and "sk-café" not in response.content.decode()
    assert not ProviderProfile.objects.exists()


def test_a_viewer_reads_providers_but_cannot_change_or_test_them(client, viewer):
    ProviderProfile.objects.create(slug="p", platform="openai-compat",
                                   base_url="http://127.0.0.1:9/v1")
    client.force_login(viewer)
    page = client.get("/panel/providers/").content.decode()
    assert 'data-provider="p"' in page and "Test the connection" not in page
    assert client.post("/panel/providers/new/", {
        "slug": "x", "platform": "openai-compat", "base_url": "http://a.b"}).status_code == 403
    assert client.post("/panel/providers/p/test/").status_code == 403
    assert ProviderProfile.objects.count() == 1


def test_connection_test_reaches_and_authenticates_against_a_real_server(op):
    with ModelServer(api_key=KEY) as server:
        _add_provider(op, server.base_url)
        response = op.post("/panel/providers/main/test/", follow=True)
        html = response.content.decode()
        assert "reachable (200)" in html and "authenticated" in html
        # the same server with a wrong key: reachable, not authenticated
        op.post("/panel/providers/main/", {"platform": "openai-compat",
                                           "base_url": server.base_url, "api_key": "sk-wrong"})
        html = op.post("/panel/providers/main/test/", follow=True).content.decode()
        assert "401: not authenticated" in html
        assert "sk-wrong" not in html


def test_a_server_that_answers_without_a_model_list_is_flagged(op, tmp_path):
    """A plain web server (no /v1/models there: 404) is reachable, but the base URL is
    wrong for a provider; the page says to check it instead of calling it fine."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _add_provider(op, f"http://127.0.0.1:{server.server_address[1]}/v1")
        html = op.post("/panel/providers/main/test/", follow=True).content.decode()
    finally:
        server.shutdown()
        server.server_close()
    assert "reachable (404)" in html and "check the base URL" in html
    assert 'class="notice warning"' in html


def test_connection_test_against_a_closed_port_says_so(op):
    _add_provider(op, f"http://127.0.0.1:{_closed_port()}/v1")
    html = op.post("/panel/providers/main/test/", follow=True).content.decode()
    assert "unreachable" in html and "Connection refused" in html
    assert "reachable (" not in html


# --- the Policy tab's warning --------------------------------------------------------------

def test_policy_warns_while_work_is_admitted_and_no_worker_is_configured(op, api):
    assert 'id="no-worker-warning"' not in op.get("/panel/policy/").content.decode()
    api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
             format="json")
    _open_policy(api, "chat")
    html = op.get("/panel/policy/").content.decode()
    assert 'id="no-worker-warning"' in html
    assert "no worker is configured" in html and "chat.direct.addressed" in html

    provider = ProviderProfile.objects.create(slug="p", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    settings = AgentSettings.current()
    settings.worker_provider = provider
    settings.save()  # a provider without a model is not yet a worker
    assert 'id="no-worker-warning"' in op.get("/panel/policy/").content.decode()
    settings.worker_model = "gpt-5.5"
    settings.save()
    assert 'id="no-worker-warning"' not in op.get("/panel/policy/").content.decode()


def test_no_warning_when_the_only_open_cells_are_on_a_disabled_source(op, api):
    api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
             format="json")
    _open_policy(api, "chat")
    Source.objects.filter(slug="chat").update(enabled=False)
    assert 'id="no-worker-warning"' not in op.get("/panel/policy/").content.decode()


# --- web chat outcomes ---------------------------------------------------------------------

def test_web_chat_shows_each_messages_outcome(op, api, client, viewer):
    api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
             format="json")
    _open_policy(api, "chat")
    response = op.post("/panel/sources/chat/chat/", {"text": "the export is broken",
                                                      "thread": "room-1"}, follow=True)
    html = response.content.decode()
    assert 'data-outcome="admitted"' in html
    assert "Admitted: a new ticket was opened for it." in html

    # an operator not on the allowlist (a viewer may not post at all)
    client.force_login(User.objects.create_user("mallory", password="x", is_staff=True))
    html = client.post("/panel/sources/chat/chat/", {"text": "do my homework",
                                                     "thread": "room-2"},
                       follow=True).content.decode()
    assert 'data-outcome="ignored"' in html
    assert "Ignored: the sender is not on the allowlist." in html
    listed = api.get("/api/v1/sources/chat/messages?thread=room-2").json()["results"]
    assert listed[0]["outcome"] == {"admitted": False,
                                    "text": "Ignored: the sender is not on the allowlist."}


# --- archived sessions ---------------------------------------------------------------------

def test_an_archived_session_offers_no_send_or_interrupt_and_refuses_them(
        op, openai_provider, session_dirs):  # noqa: F811
    session = session_services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                            model="gpt-5.5"))
    assert "message-form" in op.get(f"/panel/sessions/{session.pk}/").content.decode()
    session_services.archive(session.pk)
    assert Session.objects.get(pk=session.pk).lifecycle == "archived"
    html = op.get(f"/panel/sessions/{session.pk}/").content.decode()
    assert "message-form" not in html and ">Send<" not in html and "Interrupt" not in html
    assert 'id="archived-note"' in html
    for action in ("message", "interrupt"):
        response = op.post(f"/panel/sessions/{session.pk}/{action}/", {"text": "hello"})
        assert response.status_code == 409
        assert "This session is archived" in response.content.decode()
    assert not Turn.objects.filter(session=session).exists()


def test_the_api_refuses_to_interrupt_an_archived_session(api, openai_provider,  # noqa: F811
                                                          session_dirs):  # noqa: F811
    session = session_services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                            model="gpt-5.5"))
    session_services.archive(session.pk)
    response = api.post(f"/api/v1/sessions/{session.pk}/interrupt/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "session_archived"


# --- small faults --------------------------------------------------------------------------

def test_favicon_is_served_and_linked(op, client):
    response = client.get("/favicon.ico")  # anonymous: browsers ask before any login
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    body = b"".join(response.streaming_content)
    assert body[:4] == b"\x00\x00\x01\x00"
    assert 'rel="icon"' in op.get("/panel/tickets/").content.decode()


def test_triage_title_is_plain_text(op):
    html = op.get("/panel/triage/").content.decode()
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert title == "Triage · amux"


# --- the admin's provider form -------------------------------------------------------------

def test_the_admin_provider_form_has_a_write_only_key(client, django_user_model):
    admin_user = django_user_model.objects.create_superuser("root", password="root-pass-123")
    client.force_login(admin_user)
    form = client.get("/admin/agent_sessions/providerprofile/add/")
    assert form.status_code == 200
    assert 'name="api_key"' in form.content.decode()
    response = client.post("/admin/agent_sessions/providerprofile/add/", {
        "slug": "adm", "platform": "openai-compat", "base_url": "https://api.example.com/v1",
        "models_text": "", "api_key": KEY})
    assert response.status_code == 302, response.content.decode()[:2000]
    provider = ProviderProfile.objects.get(slug="adm")
    assert provider.secrets == {"api_key": KEY}
    change = client.get(f"/admin/agent_sessions/providerprofile/{provider.pk}/change/")
    listing = client.get("/admin/agent_sessions/providerprofile/")
    for page in (change, listing):
        assert page.status_code == 200 and KEY not in page.content.decode()
    # saving without a key keeps it
    client.post(f"/admin/agent_sessions/providerprofile/{provider.pk}/change/", {
        "slug": "adm", "platform": "openai-compat", "base_url": "https://api.example.com/v2",
        "models_text": "", "api_key": ""})
    provider.refresh_from_db()
    assert provider.base_url == "https://api.example.com/v2"
    assert provider.secrets == {"api_key": KEY}
