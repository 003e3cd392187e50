"""A ticket's worker (real Pi, scripted model) moves a slow foreground shell command to the
background after 5 s: the tool result reaches the timeline at once saying so, the turn ends
while the command still runs, the command finishes on its own, and closing the session
leaves no process behind — also not one still running in the background."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from pathlib import Path

import pytest

from effects import outbox
from intake.models import Source, Thread, Trigger
from runtimes.base import tagged_pids
from sessions import services
from sessions.models import ProviderProfile, Session, TimelineEvent, Turn
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import ModelServer, Text, ToolCall
from tests.support.sessions import gateway_served, run_host, wait_for
from tickets import worker
from tickets.actions import commands as ticket_commands
from tickets.models import AgentSettings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
def model(settings, tmp_path, monkeypatch):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    settings.WORK_DIR.mkdir(parents=True)
    settings.AMUX_SESSION_MIN_IDLE_SECONDS = 1
    require_runtime("pi")
    # the worker's runtime reaches the provider through amux's model gateway
    with ModelServer() as server, gateway_served(settings, monkeypatch):
        provider = ProviderProfile(slug="scripted", platform="openai-compat",
                                   base_url=server.base_url, model_names=["scripted-model"])
        provider.secrets = {"api_key": "sk-test"}
        provider.save()
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "worker_runtime": "pi", "worker_provider": provider,
            "worker_model": "scripted-model"})
        yield server


def _worker_session() -> Session:
    # A chat ticket: no repository to clone, the worker starts in an empty directory.
    source = Source.objects.create(kind="webchat", slug="team", name="Team chat")
    thread = Thread.objects.create(source=source, key="general", title="Slow build")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id="c5", scope="direct", actor="octocat",
        text="@amux please run the slow build", decision="explicit", strength="explicit",
        policy_version="v1")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Run the slow build")
    outbox.drain(seconds=30)  # dispatch: the worker session with the worker profile
    ticket.refresh_from_db()
    session = ticket.session
    assert session is not None and session.name == worker.session_name(ticket)
    assert session.snapshot["background_shell_after"] == worker.BACKGROUND_SHELL_AFTER
    # The host stays awake until the test closes the session.
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=600)
    return session


def _events(session_id, kind):
    return list(TimelineEvent.objects.filter(session_id=session_id, type=kind).order_by("seq"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _host_pid(tag: str, pid: int) -> int:
    """The host's pid of a process of the session that the agent knows as ``pid``: under
    bwrap the agent has a pid namespace of its own (NSpid's last entry is its number)."""
    for candidate in tagged_pids(tag):
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{candidate}/status").read_text()
            nspid = next(line.split()[1:] for line in status.splitlines()
                         if line.startswith("NSpid:"))
            if int(nspid[-1]) == pid:
                return candidate
    raise AssertionError(f"no process of the session is pid {pid} to its agent")


def test_a_slow_command_moves_to_the_background_and_dies_with_the_session(model):
    session = _worker_session()
    workdir = Path(session.workdir)
    model.script(
        ToolCall("sleep 20; echo done > out.txt"),
        Text("The build runs in the background."),
        ToolCall("sleep 600"),
        Text("The server runs in the background too."),
    )
    outcome = {}
    host = threading.Thread(target=lambda: outcome.setdefault("host", run_host(session.pk)))
    host.start()
    try:
        completed = wait_for(lambda: _events(session.pk, "tool.completed"), timeout=60)[0]
        started = _events(session.pk, "tool.started")[0]
        took = (completed.at - started.at).total_seconds()
        assert 4.5 <= took <= 8, took
        output = completed.payload["output"]
        assert completed.payload["status"] == "completed"
        assert "moved to the background" in output
        log = Path(re.search(r"output goes to (\S+\.log)", output).group(1))
        tag = Session.objects.get(pk=session.pk).runtime_tag
        # one of the session's own processes (the pid the agent was told, as it sees it)
        pid = _host_pid(tag, int(re.search(r"pid (\d+)", output).group(1)))

        # The turn ends while the command still runs.
        wait_for(lambda: _events(session.pk, "turn.completed"), timeout=30)
        assert _alive(pid) and not (workdir / "out.txt").exists()

        # A second turn, while the first command still runs: another slow one.
        services.post_message(session.pk, "start the server too")
        wait_for(lambda: len(_events(session.pk, "turn.completed")) == 2, timeout=60)
        second = _events(session.pk, "tool.completed")[1].payload["output"]
        server_pid = _host_pid(tag, int(re.search(r"pid (\d+)", second).group(1)))
        assert _alive(server_pid)

        # The first command finishes on its own, in the work directory.
        wait_for(lambda: (workdir / "out.txt").exists(), timeout=30)
        assert (workdir / "out.txt").read_text() == "done\n"
        wait_for(lambda: "[amux: exited with code 0]" in log.read_text(), timeout=10)
        assert _alive(server_pid)
    finally:
        with contextlib.suppress(TimeoutError):
            wait_for(lambda: not Turn.objects.filter(
                session_id=session.pk, state__in=["queued", "running"]).exists(), timeout=60)
        services.sleep(session.pk)
        host.join(60)
    assert outcome["host"] == "slept"
    # Closing the session killed the command still running in the background.
    assert not _alive(server_pid)
    assert not tagged_pids(tag)
