"""A dispatched worker on the real Codex app-server gets amux's MCP server with its
assignment token: the model's request lists amux's tools, and a tool call the (scripted)
model makes reaches amux — the live ASGI app under uvicorn — and lands on the ticket. The
worker's environment carries the source plugin's variables and no credential."""

from __future__ import annotations

import threading

import pytest

from effects import outbox
from intake.models import Source, Thread, Trigger
from sessions import services
from sessions.models import ProviderProfile, Session, TimelineEvent
from tests.e2e.test_executor_tools_e2e import server  # noqa: F401 - the live-server fixture
from tests.runtimes.conftest import require_runtime
from tests.support.git_server import served_github
from tests.support.model_server import ModelServer, Text, ToolCall
from tests.support.sessions import run_host, wait_for
from tickets import worker
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import AgentSettings, Assignment, Report

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

GITHUB_TOKEN = "ghp_never_in_the_worker_0123456789"


@pytest.fixture
def ticket(settings, tmp_path, monkeypatch, server):  # noqa: F811
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    settings.AMUX_SESSION_MIN_IDLE_SECONDS = 1
    settings.AMUX_URL = server
    monkeypatch.setenv("AMUX_URL", server)  # and the worker processes this test starts
    # The dispatch clones octo/app from a real git server the recording GitHub names.
    with served_github(["octo/app"], token=GITHUB_TOKEN) as (api, _git):
        source = Source(kind="github", slug="gh", name="GitHub",
                        config={"repo": "octo/app", "api_url": api.url, "handle": "amux-bot"})
        source.secrets = {"token": GITHUB_TOKEN, "webhook_secret": "hook-secret"}
        source.save()
        thread = Thread.objects.create(source=source, key="octo/app#5", title="Crash")
        trigger = Trigger.objects.create(
            source=source, thread=thread, external_id="c5", scope="comment",
            actor="octocat", addressed=True, text="@amux-bot please fix the crash",
            decision="explicit", strength="explicit", rule="gh.comment.addressed",
            policy_version="v1")
        yield ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the crash")


# how each runtime names amux's tools to the model: (namespace, prefix of a tool name)
NAMING = {"codex": ("mcp__amux", "mcp__amux."), "acp": ("mcp__amux", "mcp__amux."),
          "claude": (None, "mcp__amux__")}


@pytest.mark.parametrize("runtime", ["codex", "acp", "claude"])
def test_a_worker_lists_and_calls_amux_tools(runtime, ticket, tmp_path):
    require_runtime(runtime)
    namespace, prefix = NAMING[runtime]

    def report(text):
        name = "report" if namespace else f"{prefix}report"
        return ToolCall("", tool=name, namespace=namespace,
                        arguments={"status": "progress", "text": text})

    with ModelServer() as model:
        provider = ProviderProfile.objects.create(
            slug="scripted", platform="anthropic-compat" if runtime == "claude"
            else "openai-compat",
            base_url=model.root_url if runtime == "claude" else model.base_url)
        # Codex: a model outside its bundled catalog — for catalog models that support tool
        # search (gpt-5.5 …) the pinned Codex defers MCP tools behind `tool_search`
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "worker_runtime": runtime, "worker_provider": provider,
            "worker_model": {"codex": "scripted-model", "acp": "gpt-5.5",
                             "claude": "claude-sonnet-4-5"}[runtime]})
        model.script(report("found the crash"), Text("reported"), report("fixed it"),
                     Text("reported again"))
        outbox.drain(seconds=20)
        session = Session.objects.get(name=worker.session_name(ticket))
        Session.objects.filter(pk=session.pk).update(idle_timeout_s=5)
        # the session API stays generic: an MCP entry whose token stays in its file
        assert session.snapshot["mcp_servers"] == [{
            "name": "amux", "url": f"{worker.amux_url()}/mcp",
            "bearer_token_file": str(worker.token_file(ticket))}]
        assert session.snapshot["prompt_role"] == "worker"
        env = session.runtime_env
        assert env["AMUX_GITHUB_REPO"] == "octo/app"
        assert env["AMUX_GITHUB_HANDLE"] == "amux-bot"
        assert not any(GITHUB_TOKEN in v or "hook-secret" in v for v in env.values())

        outcome: dict = {}
        host = threading.Thread(target=lambda: outcome.setdefault("v", run_host(session.pk)))
        host.start()
        try:
            wait_for(lambda: Report.objects.filter(ticket=ticket).exists(), timeout=120)
            wait_for(lambda: TimelineEvent.objects.filter(session=session,
                                                          type="turn.completed").exists())
            # a re-dispatch re-issues the token (the old one stops working) and rewrites
            # the file; the running Codex took the old one at start, so the host restarts
            # it before the next turn, resuming the same thread
            assignment = Assignment.objects.get(ticket=ticket)
            worker.write_token(ticket, executor.issue_assignment_token(
                assignment_id=assignment.pk))
            services.post_message(session.pk, "go on")
            wait_for(lambda: Report.objects.filter(ticket=ticket).count() == 2, timeout=120)
        finally:
            host.join(120)
        assert outcome.get("v") == "slept"
        first = model.tool_requests()[0]
    names = first.tool_names
    assert {f"{prefix}{tool}" for tool in ("report", "context", "ask", "reply", "hand_back",
                                           "pull_request")} <= set(names), names
    assert list(Report.objects.filter(ticket=ticket).order_by("pk")
                .values_list("status", "text")) == [("progress", "found the crash"),
                                                    ("progress", "fixed it")]
    assert list(TimelineEvent.objects.filter(session=session, type="session.restarted")
                .values_list("payload", flat=True)) == [{"reason": "mcp_token_changed"}]
    # the resumed thread still holds the first turn
    assert "found the crash" in str(model.tool_requests()[-1].body)
    # the tool's answer went back to the model, and the turn ran with the worker prompt
    assert "found the crash" in str(model.tool_requests()[-1].body)
    started = TimelineEvent.objects.filter(session=session, type="turn.started").first()
    assert started.payload["prompt_role"] == "worker" and started.payload["prompt_revisions"]
    # the worker's own directory and the runtime's state hold no GitHub credential
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file() and path.stat().st_size < 5_000_000:
            assert GITHUB_TOKEN.encode() not in path.read_bytes(), path
