"""The Sources tab: generated form, write-only secrets, enable/disable, health, test event,
web chat."""

from __future__ import annotations

from html import escape

import pytest

from intake.models import Source, Trigger
from tests.support.github_payloads import example, signed
from tests.support.intake import processed

pytestmark = pytest.mark.django_db


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def _add_github(op_client, **extra):
    data = {"name": "GitHub", "slug": "gh", "enabled": "on", "repo": "Codertocat/Hello-World",
            "api_url": "https://api.github.com", "handle": "amux-bot", "default_branch": "main",
            "bots": "", "poll": "on", "secret_webhook_secret": "whs",
            "secret_token": "ghp_panel_secret", **extra}
    return op_client.post("/panel/sources/new/github/", data)


def test_add_a_source_through_its_generated_form(op_client):
    form = op_client.get("/panel/sources/new/github")
    assert form.status_code == 200
    html = form.content.decode()
    for name in ("repo", "api_url", "handle", "default_branch", "secret_webhook_secret",
                 "secret_private_key"):
        assert f'name="{name}"' in html
    response = _add_github(op_client)
    assert response.status_code == 302
    source = Source.objects.get(slug="gh")
    assert source.config["repo"] == ["Codertocat/Hello-World"] and source.config["poll"] is True
    assert source.secrets == {"webhook_secret": "whs", "token": "ghp_panel_secret"}
    page = op_client.get("/panel/sources/").content.decode()
    assert "http://testserver/hooks/github/gh" in page
    assert "ghp_panel_secret" not in page
    edit = op_client.get("/panel/sources/gh/edit/").content.decode()
    assert "ghp_panel_secret" not in edit and 'data-secret="token">set' in edit


def test_bad_input_shows_the_field_and_saves_nothing(op_client):
    response = _add_github(op_client, repo="not-a-repo", api_url="ftp://x")
    assert response.status_code == 400
    html = response.content.decode()
    assert "is not valid" in html and "must be an http(s) URL" in html
    assert not Source.objects.exists()


def test_edit_keeps_secrets_left_empty_and_clears_on_request(op_client):
    _add_github(op_client)
    data = {"name": "GH", "enabled": "on", "repo": "Codertocat/Hello-World",
            "api_url": "https://api.github.com", "handle": "", "default_branch": "main",
            "bots": "", "secret_token": "", "clear_webhook_secret": "on"}
    assert op_client.post("/panel/sources/gh/edit/", data).status_code == 302
    source = Source.objects.get(slug="gh")
    assert source.name == "GH" and source.secrets == {"token": "ghp_panel_secret"}
    assert source.config["poll"] is False  # unchecked box


def test_disable_and_enable(op_client):
    _add_github(op_client)
    op_client.post("/panel/sources/gh/toggle/")
    assert Source.objects.get().enabled is False
    op_client.post("/panel/sources/gh/toggle/")
    assert Source.objects.get().enabled is True


def test_health_shows_rejected_reasons_and_last_event(op_client, client):
    _add_github(op_client)
    body, headers = signed("star", example("star"), "whs")
    processed(client.post("/hooks/github/gh", data=body, content_type="application/json",
                          **headers))
    html = op_client.get("/panel/sources/").content.decode()
    assert 'data-reason="event_not_handled">event_not_handled 1' in html
    assert "star · ignored" in html


def test_send_test_event_button(op_client):
    _add_github(op_client)
    response = op_client.post("/panel/sources/gh/test/")
    assert response.status_code == 200 and 'data-status="200"' in response.content.decode()


def test_viewers_cannot_change_sources(client, viewer, operator):
    client.force_login(viewer)
    assert client.get("/panel/sources/new/github/").status_code == 403
    Source.objects.create(kind="webchat", slug="chat", name="Chat")
    assert client.post("/panel/sources/chat/toggle/").status_code == 403
    assert "Add:" not in client.get("/panel/sources/").content.decode()


def test_web_chat_from_the_panel(op_client):
    Source.objects.create(kind="webchat", slug="chat", name="Chat")
    response = op_client.post("/panel/sources/chat/chat/", {"text": "hello amux"})
    assert response.status_code == 302
    trigger = Trigger.objects.get()
    assert trigger.text == "hello amux" and trigger.actor == "operator"
    page = op_client.get(response["Location"]).content.decode()
    assert "hello amux" in page
    assert op_client.post("/panel/sources/chat/chat/", {"text": " "}).status_code == 400


def test_the_panel_and_the_api_refuse_the_same_faults_all_at_once(op_client, api):
    """One writer (intake/source_actions.py) behind both doors: the same input is refused
    with the same field names and messages, every fault at once, and nothing is stored."""
    Source.objects.create(kind="webchat", slug="taken", name="Chat")
    panel = _add_github(op_client, slug="taken", name="", repo="not-a-repo")
    assert panel.status_code == 400
    html = panel.content.decode()
    response = api.post("/api/v1/sources", {
        "kind": "github", "slug": "taken", "name": "",
        "config": {"repo": "not-a-repo", "handle": "amux-bot"}}, format="json")
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert (fields["slug"], fields["name"]) == (["is taken"], ["is required"])
    # the plugin's own words, through either door
    assert escape(fields["config.repo"][0]) in html
    for said in ("is taken", "is required"):
        assert said in html
    assert list(Source.objects.values_list("slug", flat=True)) == ["taken"]
