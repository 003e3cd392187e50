"""The `sources/` resource: generated validation, write-only secrets, health, web chat."""

from __future__ import annotations

import pytest

from intake.models import Source, Trigger
from tests.support.github_payloads import example, signed
from tests.support.intake import processed

pytestmark = pytest.mark.django_db

GITHUB = {"kind": "github", "slug": "gh", "name": "GitHub",
          "config": {"repo": "Codertocat/Hello-World", "handle": "amux-bot"},
          "secrets": {"webhook_secret": "whs", "token": "ghp_secret_value"}}


def test_create_fills_defaults_and_never_shows_secrets(api):
    response = api.post("/api/v1/sources", GITHUB, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["config"] == {"repo": ["Codertocat/Hello-World"], "handle": "amux-bot",
                              "api_url": "https://api.github.com", "default_branch": "main",
                              "bots": [], "receive_all": False, "poll": True,
                              "notice_channel": ""}
    assert body["secrets"] == {"webhook_secret": True, "token": True, "app_id": False,
                               "private_key": False, "installation_id": False}
    assert body["webhook_url"] == "http://testserver/hooks/github/gh"
    assert "ghp_secret_value" not in response.content.decode()
    listed = api.get("/api/v1/sources/").json()
    assert listed["count"] == 1 and "ghp_secret_value" not in str(listed)
    assert Source.objects.get(slug="gh").secrets["token"] == "ghp_secret_value"


def test_bad_config_is_400_naming_the_field_and_stores_nothing(api):
    bad = {**GITHUB, "config": {"repo": "not a repo", "api_url": "ftp://x", "colour": 1}}
    response = api.post("/api/v1/sources", bad, format="json")
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert {"config.repo", "config.api_url", "config.colour"} <= set(fields)
    assert not Source.objects.exists()
    response = api.post("/api/v1/sources", {**GITHUB, "kind": "gitlab"}, format="json")
    assert response.status_code == 400 and "kind" in response.json()["error"]["fields"]
    response = api.post("/api/v1/sources", {**GITHUB, "config": []}, format="json")
    assert response.status_code == 400
    response = api.post("/api/v1/sources", {**GITHUB, "secrets": {"token": 5}}, format="json")
    assert response.status_code == 400 and "secrets.token" in response.json()["error"]["fields"]
    lark = {"kind": "lark", "slug": "lk", "name": "Lark", "config": {}}
    response = api.post("/api/v1/sources", lark, format="json")
    assert "config.app_id" in response.json()["error"]["fields"]


def test_secrets_merge_and_clear_on_update(api):
    api.post("/api/v1/sources", GITHUB, format="json")
    response = api.patch("/api/v1/sources/gh", {"secrets": {"token": None, "app_id": "7"}},
                         format="json")
    assert response.status_code == 200
    assert response.json()["secrets"]["token"] is False
    assert response.json()["secrets"]["app_id"] is True
    assert Source.objects.get().secrets == {"webhook_secret": "whs", "app_id": "7"}
    response = api.patch("/api/v1/sources/gh/", {"config": {"handle": "other"}}, format="json")
    assert response.json()["config"]["repo"] == ["Codertocat/Hello-World"]
    assert response.json()["config"]["handle"] == "other"
    response = api.patch("/api/v1/sources/gh", {"kind": "lark"}, format="json")
    assert response.status_code == 400


def test_viewers_read_but_cannot_change(client, viewer, api):
    api.post("/api/v1/sources", GITHUB, format="json")
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=viewer)[1]}")
    assert reader.get("/api/v1/sources/gh").status_code == 200
    assert reader.patch("/api/v1/sources/gh", {"enabled": False},
                        format="json").status_code == 403


def test_disable_then_the_webhook_is_404(api, client):
    api.post("/api/v1/sources", GITHUB, format="json")
    api.patch("/api/v1/sources/gh", {"enabled": False}, format="json")
    body, headers = signed("issues", example("issues", "opened"), "whs")
    assert client.post("/hooks/github/gh", data=body, content_type="application/json",
                       **headers).status_code == 404


def test_health_counts_rejected_events_by_reason(api, client):
    api.post("/api/v1/sources", GITHUB, format="json")
    body, headers = signed("star", example("star"), "whs")
    processed(client.post("/hooks/github/gh", data=body, content_type="application/json",
                          **headers))
    body, headers = signed("issues", example("issues", "opened"), "wrong")
    client.post("/hooks/github/gh", data=body, content_type="application/json", **headers)
    health = api.get("/api/v1/sources/gh").json()["health"]
    assert health["rejected"] == {"event_not_handled": 1, "bad_signature": 1}
    assert health["last_event"]["event"] == "star"
    assert health["missing_secrets"] == []


def test_send_test_event(api):
    api.post("/api/v1/sources", GITHUB, format="json")
    response = api.post("/api/v1/sources/gh/test")
    assert response.json() == {"status": 200, "response": {"ping": "ok"}}
    lark = {"kind": "lark", "slug": "lk", "name": "Lark", "config": {"app_id": "cli_x"},
            "secrets": {"verification_token": "vt", "encrypt_key": "ek"}}
    assert api.post("/api/v1/sources", lark, format="json").status_code == 201
    response = api.post("/api/v1/sources/lk/test")
    assert response.json() == {"status": 200, "response": {"challenge": "amux-test"}}


def test_webchat_messages_become_triggers_and_replies_show(api, operator):
    api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
             format="json")
    response = api.post("/api/v1/sources/chat/messages",
                        {"text": "please look at the login bug", "thread": "t1", "id": "m1"},
                        format="json")
    assert response.status_code == 202, response.json()
    trigger = Trigger.objects.get(pk=response.json()["trigger"])
    assert trigger.scope == "direct" and trigger.actor == "operator" and trigger.addressed
    again = api.post("/api/v1/sources/chat/messages", {"text": "x", "thread": "t1", "id": "m1"},
                     format="json")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    from intake.send import send

    send(Source.objects.get(slug="chat"), message_id="r1", thread="t1", text="On it")
    listed = api.get("/api/v1/sources/chat/messages?thread=t1").json()["results"]
    assert [(m["author"], m["text"], m["outgoing"]) for m in listed] == [
        ("operator", "please look at the login bug", False), ("amux", "On it", True)]
    assert api.post("/api/v1/sources/chat/messages", {"text": "  "},
                    format="json").status_code == 400
    api.post("/api/v1/sources", GITHUB, format="json")
    assert api.post("/api/v1/sources/gh/messages", {"text": "x"},
                    format="json").status_code == 400


def test_delete_refused_once_events_arrived(api):
    api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
             format="json")
    api.post("/api/v1/sources/chat/messages", {"text": "hi"}, format="json")
    assert api.delete("/api/v1/sources/chat").status_code == 409
    api.post("/api/v1/sources", {"kind": "webchat", "slug": "c2", "name": "C2"}, format="json")
    assert api.delete("/api/v1/sources/c2").status_code == 204


def test_duplicate_slug_is_400(api):
    api.post("/api/v1/sources", GITHUB, format="json")
    response = api.post("/api/v1/sources", GITHUB, format="json")
    assert response.status_code == 400 and "slug" in response.json()["error"]["fields"]
