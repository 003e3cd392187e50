"""Memory and amux's MCP server end to end through a real runtime's own tool calls: a
session made with `POST /api/v1/sessions/` is launched with amux's MCP server and its own
credential, its launch context names the `mcp` channel, and the (scripted) model's calls to
`memory_search`, `memory_read` and `instance_spawn` reach amux — its real ASGI app,
lifespan on, in this process — and act for the session's owner. The same for a Lark
conversation (the person's amux user), a Pi session (the `amux` command, channel `cli`) and
a ticket's worker (its requester's memory, through its assignment's tools).

Real things only: the Codex binary, the scripted model server behind amux's model gateway,
the session host run in this process as a runtime worker runs it."""

from __future__ import annotations

import json
import threading

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from execution.models import AgentInstance
from sessions.models import MemoryEntry, ProviderProfile, Session, TimelineEvent
from tests.runtimes.conftest import require_runtime
from tests.support.asgi_thread import AsgiThread
from tests.support.model_server import ModelServer, Text, ToolCall
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


@pytest.fixture
def amux(settings, session_dirs):
    """The model server, and amux's ASGI app with its lifespan (the MCP server runs in it)
    serving the model gateway and /mcp as AMUX_URL (each lifespan starts new MCP servers,
    so every test starts the app afresh)."""
    settings.AMUX_MEMORY = True
    settings.AMUX_SESSION_MIN_IDLE_SECONDS = 1
    from sessions.gateway_threads import lookups

    try:
        with ModelServer() as model, AsgiThread(lifespan="on") as app:
            settings.AMUX_URL = app.url
            yield model
    finally:
        lookups.close()


def _client(user) -> APIClient:
    api = APIClient()
    _, token = AuthToken.objects.create(user=user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api


def _mcp(tool: str, **arguments) -> ToolCall:
    # Codex offers each MCP server's tools as one namespace tool, mcp__<server>
    return ToolCall("", tool=tool, namespace="mcp__amux", arguments=arguments)


def _outputs(model: ModelServer) -> str:
    """What the runtime sent back to the model: the tool results are in the last request."""
    return json.dumps(model.tool_requests()[-1].body)


def one_turn(session: Session, text: str | None = None) -> str:
    """Post `text` (if any) and run the session's host, as a runtime worker does, until the
    turn has completed; what the host returned (it sleeps once idle)."""
    from sessions import services

    Session.objects.filter(pk=session.pk).update(idle_timeout_s=2)
    if text is not None:
        services.post_message(session.pk, text)
    outcome: dict = {}
    host = threading.Thread(target=lambda: outcome.setdefault("v", run_host(session.pk)))
    host.start()
    try:
        wait_for(lambda: TimelineEvent.objects.filter(
            session=session, type__in=["turn.completed", "turn.failed"]).exists(),
            timeout=180)
    finally:
        host.join(120)
    assert TimelineEvent.objects.filter(session=session, type="turn.completed").exists()
    return outcome.get("v")


def test_a_direct_session_reads_its_owners_memory_and_acts_as_its_owner(
        amux, operator, viewer):
    require_runtime("codex")
    model = amux
    entry = MemoryEntry.objects.create(owner=operator, title="Release train",
                                       text="Releases leave on Tuesdays at noon.")
    MemoryEntry.objects.create(owner=viewer, title="Release secret",
                               text="the viewer's own note")
    # a model outside Codex's bundled catalog: the pinned Codex defers MCP tools behind
    # `tool_search` for catalog models that support it
    ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                   base_url=model.base_url)
    made = _client(operator).post("/api/v1/sessions/", {
        "runtime": "codex", "provider": "scripted", "model": "scripted-model"},
        format="json")
    assert made.status_code == 201, made.content
    session = Session.objects.get(pk=made.json()["id"])
    model.script(_mcp("memory_search", query="release tuesdays"),
                 _mcp("memory_read", id=entry.pk),
                 _mcp("instance_spawn", name="helper", runtime="codex",
                      provider="scripted", model="scripted-model"),
                 Text("Releases leave on Tuesdays; a helper instance is ready."))
    assert one_turn(session, "When do releases leave?") == "slept"

    first = model.tool_requests()[0]
    assert {f"mcp__amux.{tool}" for tool in (
        "memory_search", "memory_read", "session_run", "task_run", "task_submit", "task_get",
        "instance_spawn")} <= set(first.tool_names), first.tool_names
    # the launch context names the channel that works: amux's MCP server
    body = json.dumps(first.body)
    assert "Channel: the `amux` MCP server's tools" in body
    assert "<amux-memory>" in body
    sent = _outputs(model)
    # the search found the owner's entry (not the viewer's), the read brought it whole
    assert f'\\"id\\": {entry.pk}' in sent or f'"id": {entry.pk}' in sent
    assert "Releases leave on Tuesdays at noon." in sent
    assert "the viewer's own note" not in sent
    # the caller tool acted as the session's owner: the instance is the operator's
    helper = AgentInstance.objects.get(name="helper")
    assert helper.owner == operator
    assert helper.session.snapshot["scope"]["kind"] == "instance"
    assert helper.session.owner == operator


def test_a_lark_direct_chat_reads_the_memory_of_its_person(
        amux, client, operator, viewer):
    """Alice writes to the bot in Lark; the team's identities skill says she is the amux user
    `operator`: the conversation's session reads that user's memory through its own tool
    calls on amux's MCP server."""
    require_runtime("codex")
    from conversations.models import Conversation
    from prompts_app import service as prompts
    from sessions import ownership
    from tests.integration.conversations.test_lark_conversations import (
        ALICE,
        Host,
        lark_source,
        say,
    )
    from tests.support.recording_server import RecordingServer
    from tickets.models import AgentSettings

    model = amux
    entry = MemoryEntry.objects.create(owner=operator, title="Standup",
                                       text="Standup is at nine in room Kepler.")
    MemoryEntry.objects.create(owner=viewer, title="Standup", text="the viewer's standup")
    prompts.save(ownership.IDENTITIES, f"Lark {ALICE} is amux operator", 0)
    provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                              base_url=model.base_url)
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "codex", "worker_provider": provider,
        "worker_model": "scripted-model"})
    model.script(_mcp("memory_search", query="standup"), Text("At nine, in Kepler."))
    with RecordingServer() as lark:
        lark_source(lark)
        # a direct chat: Alice alone writes there (a group's topic reads the team's memory)
        outcome = say(client, lark, text="when is standup?", message_id="om_1",
                      chat_id="oc_alice", chat_type="p2p", mention=False)
        assert outcome["outcome"] == "admitted", outcome
        session = Conversation.objects.get().session
        assert session.owner == operator
        assert session.snapshot["scope"] == {"kind": "lark", "owner": operator.pk,
                                             "memory_owner": operator.pk,
                                             "via": "identities"}
        host = Host(session.pk)
        try:
            wait_for(lambda: TimelineEvent.objects.filter(
                session=session, type__in=["turn.completed", "turn.failed"]).exists(),
                timeout=180)
        finally:
            host.join()
    assert TimelineEvent.objects.filter(session=session, type="turn.completed").exists()
    sent = _outputs(model)
    assert "Standup is at nine in room Kepler." in sent and str(entry.pk) in sent
    assert "the viewer's standup" not in sent


def test_a_pi_session_reads_its_owners_memory_with_the_amux_command(amux, operator):
    """Pi takes no MCP: its session gets the `amux` command on its PATH with its own
    credential, and its launch context names the `cli` channel."""
    require_runtime("pi")
    model = amux
    entry = MemoryEntry.objects.create(owner=operator, title="Deploy window",
                                       text="Deploys only between ten and four.")
    ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                   base_url=model.base_url)
    made = _client(operator).post("/api/v1/sessions/", {
        "runtime": "pi", "provider": "scripted", "model": "scripted-model"}, format="json")
    assert made.status_code == 201, made.content
    session = Session.objects.get(pk=made.json()["id"])
    model.script(ToolCall('amux memory search "deploy window"'),
                 ToolCall(f"amux memory read {entry.pk}"),
                 ToolCall("amux context"),  # a ticket's tool: not a session's
                 Text("Between ten and four."))
    assert one_turn(session, "When may we deploy?") == "slept"
    assert "Channel: the `amux` command on your PATH" in json.dumps(
        model.tool_requests()[0].body)
    sent = _outputs(model)
    assert "Deploys only between ten and four." in sent
    assert f"{entry.pk}: Deploy window" in sent  # found by the search, then read whole
    # `amux context` is a ticket's tool: a session's credential does not open it
    assert "amux: refused (403 permission_denied)" in sent


def test_a_ticket_worker_reads_its_requesters_memory_through_its_own_tools(amux, operator):
    """A dispatched worker (real Codex, its assignment's MCP server): the requester, GitHub
    octocat, is the amux user `operator` by the identities skill; the worker's own
    `memory_search` call finds that user's entry."""
    require_runtime("codex")
    from effects import outbox
    from prompts_app import service as prompts
    from sessions import ownership
    from tests import factories as f
    from tests.support.git_server import served_github
    from tickets.actions import commands as ticket_commands
    from tickets.models import AgentSettings, Ticket

    model = amux
    entry = MemoryEntry.objects.create(owner=operator, title="Crash triage",
                                       text="Crashes go to the on-call first.")
    prompts.save(ownership.IDENTITIES, "GitHub octocat is amux operator", 0)
    provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                              base_url=model.base_url)
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "codex", "worker_provider": provider,
        "worker_model": "scripted-model"})
    model.script(_mcp("memory_search", query="crashes"), Text("Noted."))
    with served_github(["octo/app"]) as (github, _git):
        source = f.SourceFactory(config={"repo": ["octo/app"], "api_url": github.url},
                                 secrets={"webhook_secret": "s", "token": "ghp_test"})
        trigger = f.TriggerFactory(source=source, thread__key="octo/app#3", actor="octocat")
        ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix")
        outbox.drain(seconds=10)
    session = Ticket.objects.get(pk=ticket.pk).session
    assert session.snapshot["scope"]["memory_owner"] == operator.pk
    one_turn(session)  # its brief, posted by the dispatch
    assert "mcp__amux.report" in model.tool_requests()[0].tool_names  # the ticket's tools
    sent = _outputs(model)
    assert "Crashes go to the on-call first." in sent and str(entry.pk) in sent
