"""The team's main session end to end on the real Codex app-server (seed 002, path B and
role separation): a signed GitHub comment with an explicit request reaches the main
session — a real runtime session on the panel's "main" prompt — whose (scripted) model
routes it with amux's MCP tools: a 31-word routing note is refused by the tool, a short
one makes the ticket with that note. A follow-up on the ticket's thread reaches the
executor and is told to the main session, which cannot take it but can stop the ticket.
The live ASGI app serves /mcp under uvicorn; the main session's token reaches only its
own three tools."""

from __future__ import annotations

import threading

import pytest
from django.test import Client

from effects import outbox
from intake.models import Source, Trigger
from policy import services as policy
from prompts_app import service as prompts
from sessions.models import ProviderProfile, Session, TimelineEvent
from tests.e2e.test_executor_tools_e2e import server  # noqa: F401 - the live-server fixture
from tests.runtimes.conftest import require_runtime
from tests.support.github_payloads import example, signed
from tests.support.intake import processed
from tests.support.model_server import ModelServer, Text, ToolCall
from tests.support.sessions import run_host, wait_for
from tickets import main_session
from tickets.core import main_session as rules
from tickets.models import AgentSettings, MainSession, Ticket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

SECRET = "hook-secret"
NOTE = "The crash is in the login handler; read the stack trace in the issue first."
LONG_NOTE = " ".join(["read"] * 31)
TEAM_NOTE = "Crashes on login belong to the auth owners; route them with the stack trace."


def tool(name: str, **arguments) -> ToolCall:
    return ToolCall("", tool=name, namespace="mcp__amux", arguments=arguments)


def comment(text: str, comment_id: int) -> Trigger:
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = text
    payload["comment"]["id"] = comment_id
    body, headers = signed("issue_comment", payload, SECRET)
    outcome = processed(Client().post("/hooks/github/gh", data=body,
                                      content_type="application/json", **headers))
    assert outcome["outcome"] == "admitted", outcome
    return Trigger.objects.get(pk=outcome["trigger"])


@pytest.fixture
def team(settings, tmp_path, monkeypatch, server):  # noqa: F811
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    settings.AMUX_SESSION_MIN_IDLE_SECONDS = 1
    settings.AMUX_URL = server
    monkeypatch.setenv("AMUX_URL", server)
    # replies and notices go nowhere reachable: this test is about routing
    source = Source(kind="github", slug="gh", name="GitHub",
                    config={"repo": ["Codertocat/Hello-World"], "handle": "amux-bot",
                            "api_url": "http://127.0.0.1:9"})
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_never_in_a_session_0123"}
    source.save()
    policy.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["Codertocat"],
        "rows": {"comment": {"addressed": True, "unaddressed_allowed": False,
                             "unaddressed_anyone": False}}}}}, None)
    return source


def test_the_main_session_routes_with_a_short_note_and_may_only_stop_a_follow_up(team):
    require_runtime("codex")
    with ModelServer() as model:
        provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                                  base_url=model.base_url)
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "main_runtime": "codex", "main_provider": provider,
            "main_model": "scripted-model"})
        # the team's notes for the main session, edited as the panel edits them
        prompts.save("team.main", TEAM_NOTE, prompts.latest_revision(), origin="panel")
        request = comment("@amux-bot the app crashes on login, please fix it", 7001)
        assert request.disposition == rules.AWAITING and not Ticket.objects.exists()
        model.script(tool("route", trigger=request.pk, note=LONG_NOTE),
                     tool("route", trigger=request.pk, note=NOTE), Text("Routed."))
        outbox.drain(seconds=20)
        session = Session.objects.get(pk=MainSession.objects.get().session_id)
        Session.objects.filter(pk=session.pk).update(idle_timeout_s=5)
        assert session.snapshot["prompt_role"] == "main"
        assert session.snapshot["mcp_servers"] == [{
            "name": "amux", "url": f"{main_session.amux_url()}/mcp",
            "bearer_token_file": str(main_session.token_file())}]

        outcome: dict = {}
        host = threading.Thread(target=lambda: outcome.setdefault("v", run_host(session.pk)))
        host.start()
        try:
            ticket = wait_for(lambda: Ticket.objects.first(), timeout=120)
            wait_for(lambda: TimelineEvent.objects.filter(session=session,
                                                          type="turn.completed").exists())
            assert (ticket.routed_by, ticket.routing_note) == ("main", NOTE)
            assert ticket.mandate.trigger_id == request.pk

            follow = comment("@amux-bot stop, this was reported by mistake", 7002)
            assert follow.disposition == "follow_up"
            model.script(tool("route", trigger=follow.pk, note="take it"),
                         tool("stop", ticket=ticket.pk, reason="the requester withdrew it"),
                         Text("Stopped."))
            outbox.drain(seconds=20)
            wait_for(lambda: Ticket.objects.get(pk=ticket.pk).ended_at is not None,
                     timeout=120)
            wait_for(lambda: TimelineEvent.objects.filter(
                session=session, type="turn.completed").count() == 2)
        finally:
            host.join(120)
        assert outcome.get("v") == "slept"
        requests = model.tool_requests()

    ended = Ticket.objects.get(pk=ticket.pk)
    assert (ended.end_reason, ended.stop_note) == (
        "stopped", "main session: the requester withdrew it")
    assert Trigger.objects.get(pk=follow.pk).disposition == "follow_up"  # never taken
    assert ended.inputs.filter(trigger=follow).exists()  # the executor's message
    # the model saw its three tools and no other amux tool; each refusal reached it
    names = set(requests[0].tool_names)
    amux = {n for n in names if "amux" in n}
    assert amux == {"mcp__amux.route", "mcp__amux.dismiss", "mcp__amux.stop"}, names
    bodies = " ".join(str(r.body) for r in requests)
    assert "note has 31 words" in bodies
    assert "owned_by_executor" in bodies
    # every turn ran with the panel's main prompt
    started = TimelineEvent.objects.filter(session=session, type="turn.started")
    assert {e.payload["prompt_role"] for e in started} == {"main"}
    assert "Your role: the main session" in str(requests[0].body)
    assert TEAM_NOTE in str(requests[0].body)


def test_a_request_the_main_session_leaves_undecided_takes_amuxs_own_route(team):
    require_runtime("codex")
    with ModelServer() as model:
        provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                                  base_url=model.base_url)
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "main_runtime": "codex", "main_provider": provider,
            "main_model": "scripted-model"})
        request = comment("@amux-bot please fix the login crash", 7101)
        model.script(Text("I think someone should look at this."))  # no route, no dismiss
        outbox.drain(seconds=20)
        session = Session.objects.get(pk=MainSession.objects.get().session_id)
        Session.objects.filter(pk=session.pk).update(idle_timeout_s=2)
        assert run_host(session.pk) == "slept"
        outbox.drain(seconds=20)  # the turn's end reaches tickets through the outbox
    ticket = Ticket.objects.get()
    assert (ticket.routed_by, ticket.routing_note) == ("code", "")
    assert ticket.mandate.trigger_id == request.pk
    assert Trigger.objects.get(pk=request.pk).disposition == "admitted"
