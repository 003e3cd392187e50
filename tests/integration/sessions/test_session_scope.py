"""Every kind of session gets amux's MCP server scoped to its owner, and (memory on) an
owner whose memory it reads: made through each production path — the REST API (direct,
task, instance, goal agent), a schedule firing, a Lark message starting a conversation, a
ticket's dispatch — then its launch configuration's own credential used on /mcp's router
and tools, as the runtime would (tests/e2e/sessions/test_session_mcp_e2e.py drives a real
Codex through them)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from effects import outbox
from execution import profiles, schedules, session_tools
from prompts_app import service as prompts
from sessions import ownership, services
from sessions.models import MemoryEntry, Session
from sessions.new_session import Launch
from sessions.refusals import CommandError
from tests import factories as f
from tests.integration.goals.conftest import add_agent
from tests.support.git_server import served_github
from tickets.actions import commands as ticket_commands
from tickets.models import AgentSettings, Ticket

pytestmark = pytest.mark.django_db


@pytest.fixture
def memory_on(settings, session_dirs, openai_provider):
    settings.AMUX_MEMORY = True
    profiles.ensure_builtin()
    return openai_provider


def amux_token(session: Session) -> str:
    """The bearer amux's MCP server is offered with at this session's launch."""
    servers = {s.name: s for s in services.runtime_config(session).mcp_servers}
    assert set(servers) == {"amux"}, servers
    assert servers["amux"].url == f"{django_settings.AMUX_URL.rstrip('/')}/mcp"
    return servers["amux"].token()


def reads(session: Session, entry: MemoryEntry) -> None:
    token = amux_token(session)
    assert session_tools.session_of(token) == session  # what /mcp routes it by
    found = session_tools.memory_call(token, "memory_search", {"query": entry.title})
    assert [r["id"] for r in found["results"]] == [entry.pk]
    assert session_tools.memory_call(token, "memory_read", {"entry_id": entry.pk})[
        "text"] == entry.text


def test_direct_task_instance_and_goal_sessions_act_for_their_caller(
        memory_on, api, operator, viewer, tmp_path):
    entry = MemoryEntry.objects.create(owner=operator, title="Release train",
                                       text="Releases leave on Tuesdays.")
    other = MemoryEntry.objects.create(owner=viewer, title="Release secret", text="no")
    direct = api.post("/api/v1/sessions/", {"runtime": "codex", "provider": "scripted",
                                            "model": "gpt-5.5"}, format="json")
    task = api.post("/api/v1/tasks/", {"prompt": "hi", "runtime": "codex",
                                       "provider": "scripted", "model": "gpt-5.5"},
                    format="json")
    instance = api.post("/api/v1/instances/", {"name": "helper", "runtime": "codex",
                                               "provider": "scripted", "model": "gpt-5.5"},
                        format="json")
    api.post("/api/v1/goals/", {"slug": "ship", "title": "Ship"}, format="json")
    add_agent(api, "builder", runtime="codex", provider="scripted", model="gpt-5.5")
    goal = api.post("/api/v1/goals/ship/agents/builder/start/")
    made = {"direct": direct.json()["id"], "task": task.json()["session"],
            "instance": instance.json()["session"], "goal": goal.json()["session"]}
    for kind, pk in made.items():
        session = Session.objects.get(pk=pk)
        assert session.owner == operator, kind
        assert session.snapshot["scope"] == {"kind": kind, "owner": operator.pk,
                                             "memory_owner": operator.pk, "via": "caller"}
        assert session.snapshot["execution"]["memory"] == {"enabled": True,
                                                           "owner": operator.pk}
        reads(session, entry)
        token = amux_token(session)
        # another user's entry is not there; the caller tools act as the owner
        with pytest.raises(CommandError) as missing:
            session_tools.memory_call(token, "memory_read", {"entry_id": other.pk})
        assert missing.value.status == 404
        with pytest.raises(CommandError) as not_yours:
            session_tools.call_as_owner(token, "task_get", {"task": 10 ** 6})
        # a task's child gets no session tools (seed 000); the others act as the owner
        assert not_yours.value.code == ("permission_denied" if kind == "task"
                                        else "not_found"), kind
        assert session.snapshot["execution"]["role"] == ("task" if kind == "task"
                                                          else "session")
    # a session may not wait on a prompt in itself
    direct_token = amux_token(Session.objects.get(pk=made["direct"]))
    with pytest.raises(CommandError) as itself:
        session_tools.call_as_owner(direct_token, "session_run",
                                    {"prompt": "x", "session": made["direct"]})
    assert itself.value.field == "session"
    # archived: its credential opens nothing
    services.archive(made["direct"])
    with pytest.raises(session_tools.NotASession):
        session_tools.memory_call(direct_token, "memory_search", {"query": "release"})


def test_a_schedule_run_acts_for_the_schedules_owner(memory_on, api, operator):
    entry = MemoryEntry.objects.create(owner=operator, title="Standup", text="At nine.")
    made = api.post("/api/v1/schedules/", {
        "name": "nightly", "every_seconds": 60, "mode": "new-session-per-run",
        "prompt": "Summarise.", "runtime": "codex", "model": "gpt-5.5",
        "provider": "scripted"}, format="json")
    assert made.status_code == 201, made.content
    (run_id,) = schedules.fire_due(timezone.now() + timedelta(seconds=61))
    run = schedules.fire(run_id)
    assert run.session.owner == operator
    assert run.session.snapshot["scope"]["kind"] == "schedule"
    reads(run.session, entry)


def test_a_ticket_worker_reads_its_requesters_memory(memory_on, settings, operator):
    """The requester (GitHub octocat) maps to the amux user through the identities skill;
    the worker acts for nobody, and keeps its ticket's own MCP server."""
    entry = MemoryEntry.objects.create(owner=operator, title="Crash triage",
                                       text="Crashes go to the on-call first.")
    prompts.save(ownership.IDENTITIES, "GitHub octocat is Lark ou_octo, amux operator", 0)
    with served_github(["octo/app"]) as (github, _git):
        source = f.SourceFactory(config={"repo": ["octo/app"], "api_url": github.url},
                                 secrets={"webhook_secret": "s", "token": "ghp_test"})
        trigger = f.TriggerFactory(source=source, thread__key="octo/app#3", actor="octocat")
        ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "worker_runtime": "codex", "worker_provider": memory_on,
            "worker_model": "gpt-5.5"})
        outbox.drain(seconds=10)
    session = Ticket.objects.get(pk=ticket.pk).session
    assert session.owner is None
    assert session.snapshot["scope"] == {"kind": "worker", "owner": None,
                                         "memory_owner": operator.pk, "via": "identities"}
    assert session.snapshot["amux_mcp"] is False  # the ticket's tools, by its token
    (server,) = services.runtime_config(session).mcp_servers
    assert server.bearer_token_file.endswith(f"ticket-{ticket.pk}")
    from rest_framework.test import APIClient

    tools = APIClient()
    tools.credentials(HTTP_AUTHORIZATION=f"Bearer {server.token()}")
    found = tools.post("/api/v1/tools/memory_search/", {"query": "crashes on-call"},
                       format="json")
    assert found.status_code == 200, found.content
    assert [r["id"] for r in found.json()["results"]] == [entry.pk]
    read = tools.post("/api/v1/tools/memory_read/", {"id": entry.pk}, format="json")
    assert read.json()["text"] == entry.text
    settings.AMUX_MEMORY = False  # switched off since: each call is checked again
    off = tools.post("/api/v1/tools/memory_read/", {"id": entry.pk}, format="json")
    assert off.status_code == 409 and off.json()["error"]["code"] == "memory_off"


def test_who_a_person_maps_to(memory_on, settings, operator, django_user_model):
    octocat = django_user_model.objects.create_user("octocat")
    # a login that happens to be an amux username maps nobody: only the skill maps
    assert ownership.person_user("OctoCat") == (None, "none")
    prompts.save(ownership.IDENTITIES, "Lark ou_a is GitHub alice-gh, amux Operator\n"
                 "Lark ou_b is amux operator or amux octocat", 0)
    assert ownership.person_user("ou_a") == (operator, "identities")
    assert ownership.person_user("ALICE-GH") == (operator, "identities")
    assert ownership.person_user("ou_b") == (None, "none")  # two users: no guess
    assert ownership.of_person("worker", "ou_zz", acts=False) == ownership.Scope("worker")
    settings.AMUX_MEMORY_TEAM = "octocat"
    assert ownership.of_person("lark", "ou_zz", acts=True) == ownership.Scope(
        "lark", None, octocat.pk, "team")
    assert ownership.of_person("lark", "ou_a", acts=True) == ownership.Scope(
        "lark", operator.pk, operator.pk, "identities")


def test_a_session_without_an_owner_still_has_its_channel(memory_on):
    """Made by code with no caller (a bench): amux's MCP server is there, its memory tools
    say why there is no memory, its caller tools that it acts for nobody."""
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    token = amux_token(session)
    assert session_tools.session_of(token) == session
    with pytest.raises(CommandError) as unbound:
        session_tools.memory_call(token, "memory_search", {"query": "x"})
    assert unbound.value.code == "memory_unavailable" and "no_owner" in str(unbound.value)
    with pytest.raises(CommandError) as nobody:
        session_tools.call_as_owner(token, "task_get", {"task": 1})
    assert nobody.value.code == "no_owner"
    # a launch-less config (a goal's check beside the runtime) issues nothing
    assert services.runtime_config(session, launch=False).mcp_servers == []


def test_the_rest_memory_tools_take_a_sessions_credential_and_nothing_else(
        memory_on, api, operator):
    """The door a Pi session's `amux memory` uses: its credential opens the memory tools
    only; bad input is refused naming the field."""
    from rest_framework.test import APIClient

    entry = MemoryEntry.objects.create(owner=operator, title="Oncall", text="Bob this week.")
    made = api.post("/api/v1/sessions/", {"runtime": "pi", "provider": "scripted",
                                          "model": "gpt-5.5"}, format="json")
    session = Session.objects.get(pk=made.json()["id"])
    config = services.runtime_config(session)
    assert config.mcp_servers == []  # Pi takes no MCP: the `amux` command instead
    assert (Path(config.extra_path[0]) / "amux").is_file()
    assert config.extra_env["AMUX_API_URL"].endswith("/api/v1")
    tools = APIClient()
    tools.credentials(HTTP_AUTHORIZATION=f"Bearer {config.extra_env['AMUX_ASSIGNMENT_TOKEN']}")
    found = tools.post("/api/v1/tools/memory_search/", {"query": "oncall"}, format="json")
    assert found.status_code == 200, found.content
    assert [r["id"] for r in found.json()["results"]] == [entry.pk]
    read = tools.post("/api/v1/tools/memory_read/", {"id": str(entry.pk)}, format="json")
    assert read.json()["text"] == "Bob this week."
    for body, field in (({"id": "abc"}, "id"), ({"id": True}, "id")):
        bad = tools.post("/api/v1/tools/memory_read/", body, format="json")
        assert bad.status_code == 400, bad.content
        assert field in str(bad.json()["error"]), bad.json()
    unknown = tools.post("/api/v1/tools/memory_search/", {"query": "x", "owner": 1},
                         format="json")
    assert unknown.status_code == 400 and "owner" in unknown.json()["error"]["fields"]
    assert tools.get("/api/v1/tools/context/").status_code == 403  # a ticket's tool
    assert tools.post("/api/v1/tools/report/", {"status": "done"},
                      format="json").status_code == 403
    services.archive(session.pk)  # archived: the credential opens nothing
    assert tools.post("/api/v1/tools/memory_search/", {"query": "oncall"},
                      format="json").status_code == 401
