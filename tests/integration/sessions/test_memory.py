"""On-demand memory: REST memory/ is each user's own; a session's binding is frozen at
creation (off by default, unavailable on generic ACP); only explicit tool calls read it."""

from __future__ import annotations

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from sessions import services
from sessions.models import MemoryEntry, ProviderProfile, Session
from tests import factories as f
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import Assignment, Ticket

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


def test_a_session_reads_only_through_its_tools(settings, operator, viewer, provider,
                                                session_dirs):
    settings.AMUX_MEMORY = True
    MemoryEntry.objects.create(owner=viewer, title="Secret", text="viewer's deploy key spot")
    entry = MemoryEntry.objects.create(owner=operator, title="Release train",
                                       text="Releases leave on Tuesdays at noon.")
    trigger = f.TriggerFactory(source=f.SourceFactory(), thread__key="octo/app#1",
                               policy_version="v1")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="t")
    assignment = Assignment.objects.get(ticket=ticket)
    token = executor.issue_assignment_token(assignment_id=assignment.pk)
    session = services.create_session(runtime="pi", provider="p", model="m",
                                      memory_owner=operator.pk)
    Ticket.objects.filter(pk=ticket.pk).update(session=session)
    tools = APIClient()
    tools.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    found = tools.post("/api/v1/tools/memory_search/", {"query": "release tuesdays"},
                       format="json")
    assert found.status_code == 200, found.content
    assert [r["id"] for r in found.json()["results"]] == [entry.pk]
    assert tools.post("/api/v1/tools/memory_search/", {"query": "deploy key"},
                      format="json").json()["results"] == []  # another owner's
    read = tools.post("/api/v1/tools/memory_read/", {"id": entry.pk}, format="json")
    assert read.json()["text"] == "Releases leave on Tuesdays at noon."
    other = MemoryEntry.objects.get(owner=viewer)
    assert tools.post("/api/v1/tools/memory_read/", {"id": other.pk},
                      format="json").status_code == 404
    assert tools.post("/api/v1/tools/memory_search/", {"query": ""},
                      format="json").status_code == 400
    # switched off since: each call is checked again
    settings.AMUX_MEMORY = False
    off = tools.post("/api/v1/tools/memory_read/", {"id": entry.pk}, format="json")
    assert off.status_code == 409 and off.json()["error"]["code"] == "memory_off"
    # a session created without an owner has no memory
    unbound = services.create_session(runtime="pi", provider="p", model="m")
    Ticket.objects.filter(pk=ticket.pk).update(session=unbound)
    settings.AMUX_MEMORY = True
    assert tools.post("/api/v1/tools/memory_search/", {"query": "release"},
                      format="json").json()["error"]["code"] == "memory_unavailable"
