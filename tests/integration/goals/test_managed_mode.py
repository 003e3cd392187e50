"""Managed mode (seed 003, "Validation criteria → Managed mode") with the real Pi against the
scripted model server: amux launches one runtime for the agent and keeps one opaque native
session (Pi's session file) across user messages, bounded LoopX turns, an interrupt and a
host that dies; and Pi progresses with no host-native goal loop installed. The session host
runs in this process, or in a child process when the test kills it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from goals import turns
from goals.models import GoalTurn, WorkingSession
from runtimes import pi as pi_runtime
from sessions import hosting, services
from sessions.models import Session, TimelineEvent, Turn
from sessions.tasks import reclaim_dead_leases
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for
from tests.support.workers import ROOT, purge_queues, worker_env

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

TURNS = "/api/v1/goals/ship/agents/builder/turns/"


@pytest.fixture
def session_id(api, pi_agent):
    started = api.post("/api/v1/goals/ship/agents/builder/start/")
    assert started.status_code == 201, started.content
    return started.json()["session"]


# --------------------------------------------------------------------- helpers
def pi_dir(session_id: int) -> Path:
    return services.state_dir(Session.objects.get(pk=session_id)) / "pi-sessions"


def session_files(session_id: int) -> list[str]:
    return sorted(str(p) for p in pi_dir(session_id).glob("*.jsonl"))


def pi_processes(session_id: int) -> dict[int, list[str]]:
    return pi_processes_in(services.state_dir(Session.objects.get(pk=session_id)))


def pi_processes_in(state_dir: Path) -> dict[int, list[str]]:
    """Live Pi processes of the session whose state directory this is (node with that
    session's own Pi agent directory in its environment; Pi renames its process title, so
    argv is read when first seen). A child Pi forks for a tool call is node too until it
    execs — same environment, Pi's renamed title — so a process whose parent is one of
    them is the runtime's child, not another runtime."""
    needle = f"PI_CODING_AGENT_DIR={state_dir / 'home' / '.pi' / 'agent'}".encode()
    found, parents = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            exe = os.readlink(f"/proc/{entry}/exe")
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[0] != b"Z" and needle in environ and Path(exe).name.startswith("node"):
            found[int(entry)] = [a.decode() for a in cmd.split(b"\0") if a]
            parents[int(entry)] = int(stat[1])
    return {pid: argv for pid, argv in found.items() if parents[pid] not in found}


class Sampler:
    """Every Pi process of the session seen while the test runs (sampled every 50 ms)."""

    def __init__(self, session_id: int):
        self.state_dir = services.state_dir(Session.objects.get(pk=session_id))
        self.seen: dict[int, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for pid, argv in pi_processes_in(self.state_dir).items():
                self.seen.setdefault(pid, argv)
            time.sleep(0.05)

    def stop(self) -> dict[int, list[str]]:
        self._stop.set()
        self._thread.join(5)
        return self.seen


def host_in_thread(session_id: int):
    outcome: list[str] = []
    thread = threading.Thread(target=lambda: outcome.append(run_host(session_id)))
    thread.start()
    return thread, outcome


def completed(session_id: int) -> int:
    return TimelineEvent.objects.filter(session_id=session_id, type="turn.completed").count()


def say(api, text):
    answer = api.post("/api/v1/goals/ship/agents/builder/messages/", {"text": text})
    assert answer.status_code == 202, answer.content


def bounded_turn(api, key: str, session_id: int) -> dict:
    """POST one LoopX turn and do what the supervisor task does while a host serves it."""
    posted = api.post(TURNS, {"key": key})
    assert posted.status_code == 202, posted.content
    pk = GoalTurn.objects.get(key=key).pk
    assert turns.advance(pk).state == "running"
    wait_for(lambda: Turn.objects.filter(session_id=session_id, key=f"loopx-{key}",
                                         state="completed").exists(), timeout=60)
    assert turns.advance(pk).state == "done"
    return api.get(TURNS + f"{key}/").json()


def terminals(session_id: int) -> list[tuple[str, str]]:
    return list(TimelineEvent.objects.filter(
        session_id=session_id, type__in=["turn.completed", "turn.failed", "turn.cancelled"])
        .order_by("seq").values_list("turn__key", "type"))


# ----------------------------------------------------------------------- criteria
def test_desktop_launches_exactly_one_selected_runtime_and_reuses_the_same_opaque_session_across_three_user_messages_and_multiple_bounded_turns(  # noqa: E501
        api, session_id, model_server):
    Session.objects.filter(pk=session_id).update(idle_timeout_s=6)
    api.patch("/api/v1/goals/ship/", {"check_command": "test -f one.txt"})
    first = api.post("/api/v1/goals/ship/todos/", {"title": "write one.txt"}).json()["id"]
    second = api.post("/api/v1/goals/ship/todos/", {"title": "write two.txt"}).json()["id"]
    model_server.script(Text("one"), Text("two"), Text("three"),
                        ToolCall("echo 1 > one.txt"), Text("wrote one.txt"),
                        ToolCall("echo 2 > two.txt"), Text("wrote two.txt"))
    sampler = Sampler(session_id)
    for text in ("remember the word pelican", "second message", "third message"):
        say(api, text)
    host, outcome = host_in_thread(session_id)
    try:
        wait_for(lambda: completed(session_id) == 3, timeout=90)
        native = Session.objects.get(pk=session_id).native_ref
        t1 = bounded_turn(api, "t1", session_id)
        t2 = bounded_turn(api, "t2", session_id)
    finally:
        host.join(90)
    seen = sampler.stop()
    assert outcome == ["slept"]
    # exactly one runtime process, of the selected runtime, for all of it
    assert len(seen) == 1, seen
    [argv] = seen.values()
    assert Path(argv[1]) == pi_runtime.pi_cli(Path(django_settings.AMUX_RUNTIMES_DIR))
    # one opaque native session: the same session file from the first message on
    session = Session.objects.get(pk=session_id)
    assert session.runtime == "pi" and session.native_ref == native
    assert session_files(session_id) == [native]
    assert Session.objects.count() == 1
    assert WorkingSession.objects.get(active=True).session_id == session_id
    # three user messages and two bounded turns, in one conversation
    assert [k for k, t in terminals(session_id) if t == "turn.completed"][-2:] == [
        "loopx-t1", "loopx-t2"]
    assert completed(session_id) == 5 and Turn.objects.filter(session_id=session_id).count() == 5
    last = str(model_server.tool_requests()[-1].body)
    for text in ("remember the word pelican", "second message", "third message",
                 "write one.txt", "write two.txt"):
        assert text in last
    assert (t1["todo"], t1["writeback"]["todo_state"], t1["quota_spent"]) == (first, "done", 1)
    assert (t2["todo"], t2["writeback"]["todo_state"], t2["quota_spent"]) == (second, "done", 1)
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 2


def test_interruption_and_application_restart_preserve_or_explicitly_reconcile_the_session_instead_of_silently_creating_another_one(  # noqa: E501
        api, session_id, model_server, tmp_path):
    Session.objects.filter(pk=session_id).update(idle_timeout_s=1)
    model_server.script(Text("noted: pelican"), Text("too slow", delay=30))
    say(api, "remember the word pelican")
    say(api, "take your time")
    host, outcome = host_in_thread(session_id)
    try:
        model_server.wait_for_requests(2, timeout=60)
        wait_for(lambda: Turn.objects.filter(session_id=session_id, seq=2,
                                             state="running").exists())
        native = Session.objects.get(pk=session_id).native_ref
        interrupted = api.post(f"/api/v1/sessions/{session_id}/interrupt/")
        assert interrupted.status_code in (200, 202), interrupted.content
        wait_for(lambda: terminals(session_id)[-1:] and
                 terminals(session_id)[-1][1] == "turn.cancelled", timeout=30)
    finally:
        host.join(60)
    assert outcome == ["slept"]
    assert api.get("/api/v1/goals/ship/agents/builder/").json()["lifecycle"] == "interrupted"
    assert Session.objects.get(pk=session_id).native_ref == native
    assert session_files(session_id) == [native]

    # the application dies mid-turn: a host in its own process, killed with SIGKILL
    model_server.script(Text("cut off", delay=60))
    say(api, "keep going")
    asked = len(model_server.tool_requests())
    env = worker_env(Path(django_settings.DATA_DIR), AMUX_SESSION_LEASE_SECONDS="6",
                     AMUX_SESSION_MIN_IDLE_SECONDS="1")
    child = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", "import asyncio, django; django.setup(); "
         "from sessions.host import SessionHost; "
         f"print(asyncio.run(SessionHost({session_id}).run()))"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "host.log", "wb"), start_new_session=True)  # noqa: SIM115
    try:
        wait_for(lambda: len(model_server.tool_requests()) > asked, timeout=90)
        assert Turn.objects.get(session_id=session_id, seq=3).state == "running"
        [killed_pi] = pi_processes(session_id)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
        wait_for(lambda: not pi_processes(session_id), timeout=20)  # Pi died with it
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert Turn.objects.get(session_id=session_id, seq=3).state == "running"  # cut
    # a restarting runtime worker takes the dead host's lease back and a new host resumes
    assert reclaim_dead_leases(hosting.hostname()) == 1
    purge_queues()  # its host task: this test runs the host in-process instead
    model_server.script(Text("resumed: the word was pelican"))
    assert run_host(session_id) == "slept"
    session = Session.objects.get(pk=session_id)
    assert session.native_ref == native and session_files(session_id) == [native]
    assert not pi_processes(session_id) and killed_pi
    assert Session.objects.count() == 1
    assert WorkingSession.objects.get(active=True).session_id == session_id
    # the cut turn explicitly reconciled: cancelled once, its input continued
    cut = Turn.objects.get(session_id=session_id, seq=3)
    assert cut.state == "cancelled"
    assert TimelineEvent.objects.filter(turn=cut, type__in=[
        "turn.completed", "turn.failed", "turn.cancelled"]).count() == 1
    resumed = Turn.objects.filter(session_id=session_id, seq__gt=3).get()
    assert resumed.state == "completed" and resumed.input["text"].endswith("keep going")
    last = str(model_server.tool_requests()[-1].body)
    assert "remember the word pelican" in last and "noted: pelican" in last


def test_the_runtime_progresses_with_no_host_native_goal_loop_installed(api, session_id,
                                                                       model_server):
    Session.objects.filter(pk=session_id).update(idle_timeout_s=1)
    api.patch("/api/v1/goals/ship/", {"check_command": "test -f done.txt"})
    todo = api.post("/api/v1/goals/ship/todos/", {"title": "write done.txt"}).json()["id"]
    model_server.script(ToolCall("echo shipped > done.txt"), Text("wrote done.txt"))
    sampler = Sampler(session_id)
    assert api.post(TURNS, {"key": "t1"}).status_code == 202
    pk = GoalTurn.objects.get(key="t1").pk
    assert turns.advance(pk).state == "running"  # the supervisor posted the todo
    try:
        assert run_host(session_id) == "slept"
    finally:
        [argv] = sampler.stop().values()
    assert turns.advance(pk).state == "done"
    result = api.get(TURNS + "t1/").json()
    # no Pi extension but amux's own two (no goal loop), nothing discovered on disk
    assert "--no-extensions" in argv
    extensions = [Path(argv[i + 1]) for i, a in enumerate(argv) if a in ("-e", "--extension")]
    ours = {pi_runtime.SYSTEM_PROMPT, pi_runtime.BACKGROUND_BASH}
    assert extensions and set(extensions) <= ours
    assert not any("goal" in p.name.lower() for p in extensions)
    session = Session.objects.get(pk=session_id)
    agent_dir = services.state_dir(session) / "home" / ".pi" / "agent"
    assert not (agent_dir / "extensions").exists()
    assert not (Path(session.workdir) / ".pi").exists()
    # the session has no native goal; amux's bounded turn moved the work
    assert api.get(f"/api/v1/sessions/{session_id}/").json().get("goal") in (None, {})
    assert not TimelineEvent.objects.filter(session_id=session_id,
                                            type__startswith="goal.").exists()
    assert (result["state"], result["writeback"]["todo_state"], result["quota_spent"]) == (
        "done", "done", 1)
    assert api.get(f"/api/v1/goals/ship/todos/{todo}/").json()["state"] == "done"
