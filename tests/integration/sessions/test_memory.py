"""On-demand memory: REST memory/ is each user's own; a session's binding is frozen at
creation (off by default, unavailable on generic ACP). Who owns each kind of session's
memory and how its tools read it: test_session_scope.py (and, through a real runtime's own
tool calls, tests/e2e/sessions/test_session_mcp_e2e.py)."""

from __future__ import annotations

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from sessions import services
from sessions.models import MemoryEntry, ProviderProfile, Session

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    api = APIClient()
    _, token = AuthToken.objects.create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api


@pytest.fixture
def provider():
    return ProviderProfile.objects.create(slug="p", platform="openai-compat",
                                          base_url="http://127.0.0.1:9/v1")


def test_memory_entries_are_their_owners_alone(operator, viewer, django_user_model):
    other = django_user_model.objects.create_user("second-operator", is_staff=True)
    mine, theirs = _client(operator), _client(other)
    made = mine.post("/api/v1/memory/", {"title": "Deploys", "text": "Friday: never."},
                     format="json")
    assert made.status_code == 201, made.content
    entry = made.json()["id"]
    assert mine.get("/api/v1/memory").json()["count"] == 1
    assert theirs.get("/api/v1/memory/").json()["count"] == 0
    assert theirs.get(f"/api/v1/memory/{entry}/").status_code == 404
    assert theirs.delete(f"/api/v1/memory/{entry}/").status_code == 404
    # a viewer reads (their own: none) but writes nothing, like every other resource
    looker = _client(viewer)
    assert looker.get("/api/v1/memory/").json()["count"] == 0
    assert looker.post("/api/v1/memory/", {"title": "t", "text": "x"},
                       format="json").status_code == 403
    changed = mine.patch(f"/api/v1/memory/{entry}/", {"text": "Friday: only hotfixes."},
                         format="json")
    assert changed.status_code == 200 and changed.json()["text"] == "Friday: only hotfixes."
    for body, field in (({"title": 5, "text": "x"}, "title"), ({"title": "t", "text": ""},
                                                                "text")):
        bad = mine.post("/api/v1/memory/", body, format="json")
        assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {field}
    assert mine.delete(f"/api/v1/memory/{entry}").status_code == 204
    assert not MemoryEntry.objects.filter(owner=operator).exists()


def test_the_binding_is_frozen_at_creation(settings, operator, provider, session_dirs):
    api = _client(operator)
    body = {"runtime": "codex", "provider": "p", "model": "m"}
    off = api.post("/api/v1/sessions/", body, format="json")
    assert off.status_code == 201, off.content
    assert Session.objects.get(pk=off.json()["id"]).snapshot["execution"]["memory"] == {
        "enabled": False, "reason": "memory_off"}
    settings.AMUX_MEMORY = True
    on = Session.objects.get(pk=api.post("/api/v1/sessions/", body, format="json")
                             .json()["id"])
    assert on.snapshot["execution"]["memory"] == {"enabled": True, "owner": operator.pk}
    assert services.runtime_config(on).memory is True
    # the isolation backend and the launch role are frozen beside it
    from sessions import isolation

    assert on.snapshot["execution"]["isolation"] == isolation.selected_backend()
    assert services.runtime_config(on).isolation == isolation.selected_backend()
    assert on.snapshot["execution"]["role"] == "session"
    settings.AMUX_ISOLATION = "private-home" if isolation.selected_backend() == \
        "linux-dac" else "linux-dac"
    assert services.runtime_config(on).isolation == on.snapshot["execution"]["isolation"]
    settings.AMUX_ISOLATION = ""
    acp = Session.objects.get(pk=api.post("/api/v1/sessions/", {**body, "runtime": "acp"},
                                          format="json").json()["id"])
    assert acp.snapshot["execution"]["memory"]["reason"] == "memory_unavailable"
    assert services.runtime_config(acp).memory is False
    listed = api.get("/api/v1/runtimes/").json()
    runtimes = {r["name"]: r["capabilities"] for r in listed.get("results", listed)}
    assert runtimes["acp"]["memory"] is False and runtimes["codex"]["memory"] is True
    assert runtimes["acp"]["session_schedule"] is False
