"""Tasks and instances on real runtimes against the scripted model server: a task's child
session runs its turn through the session host, and the run takes the turn's outcome from
the durable `task.turn_ended` effect (drained by the real drainer); settings resolve from
the caller, then the default preset; the permission policy drives the runtime's config."""

from __future__ import annotations

import threading
import tomllib

import pytest

from effects import outbox
from execution import instances, profiles, task_runs
from execution.models import LaunchPreset, TaskRun
from sessions import isolation, services
from sessions.models import Session
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.host_idle(2),
              pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def _serve(session_id: int) -> threading.Thread:
    """A session host for the session, in a thread, until it sleeps."""
    Session.objects.filter(pk=session_id).update(idle_timeout_s=2)
    host = threading.Thread(target=run_host, args=(session_id,))
    host.start()
    return host


def _settled(run_id: int) -> TaskRun:
    """Drain the outbox (the real drainer) until the run has its outcome."""
    def done():
        outbox.drain(seconds=2)
        run = TaskRun.objects.get(pk=run_id)
        return run if run.state in TaskRun.TERMINAL else None

    return wait_for(done, timeout=120, interval=0.2)


def test_a_task_without_runtime_runs_on_the_default_preset(session_dirs, model_server,
                                                           openai_provider, operator):
    require_runtime("codex")
    profiles.ensure_builtin()
    assert LaunchPreset.objects.get(is_default=True).slug == "codex"
    model_server.script(Text("The answer is 42."))
    run = task_runs.submit_task(owner=operator, prompt="What is the answer?")
    assert run.state == "queued"
    execution = run.execution
    assert (execution["runtime"], execution["model"], execution["preset"]) == \
        ("codex", "gpt-5.5", "codex")
    assert execution["provider"] == "scripted"
    # a task's child session follows the permission policy, not the preset's bypass
    assert execution["permission"]["mode"] == "policy-allow"
    assert execution["permission"]["source"] == "policy"
    # the same native settings under every backend; the sandbox in force is named
    outer = isolation.selected_backend() == "bwrap"
    assert execution["permission"]["native"] == {"approval_policy": "on-request",
                                                 "sandbox_mode": "workspace-write"}
    assert (execution["isolation"], execution["sandbox"]) == (
        isolation.selected_backend(), "bwrap" if outer else "workspace-write")
    assert run.session.snapshot["execution"] == execution
    host = _serve(run.session_id)
    try:
        settled = _settled(run.pk)
    finally:
        host.join(120)
    assert settled.state == "succeeded"
    assert settled.result == "The answer is 42."
    assert settled.started_at and settled.ended_at
    # the frozen permission reached Codex's own config and its thread parameters
    config = tomllib.loads((services.state_dir(run.session) / "home" / ".codex"
                            / "config.toml").read_text())
    assert (config["approval_policy"], config["sandbox_mode"]) == ("on-request",
                                                                   "workspace-write")
    assert task_runs.wait_for_result(run.pk, 0).state == "succeeded"


def test_explicit_caller_settings_win_over_the_default_preset(session_dirs, model_server,
                                                             openai_provider, operator):
    require_runtime("pi")
    model_server.script(Text("pi here"))
    run = task_runs.submit_task(owner=operator, prompt="who are you?", runtime="pi",
                                model="scripted-model", permission_policy="bypass")
    assert (run.execution["runtime"], run.execution["model"]) == ("pi", "scripted-model")
    assert run.execution["preset"] is None
    assert run.execution["permission"]["mode"] == "bypass"
    host = _serve(run.session_id)
    try:
        settled = _settled(run.pk)
    finally:
        host.join(120)
    assert (settled.state, settled.result) == ("succeeded", "pi here")
    assert model_server.tool_requests()[0].body["model"] == "scripted-model"


def test_an_instance_keeps_its_native_conversation_across_two_tasks(
        session_dirs, model_server, openai_provider, operator):
    require_runtime("codex")
    agent = instances.create_instance(owner=operator, name="keeper", runtime="codex",
                                      model="gpt-5.5")
    model_server.script(Text("Noted: the code word is OSPREY."), Text("It was OSPREY."))
    first = task_runs.submit_task(owner=operator, prompt="Remember the code word OSPREY.",
                                  instance=agent)
    host = _serve(agent.session_id)
    try:
        assert _settled(first.pk).result == "Noted: the code word is OSPREY."
    finally:
        host.join(120)  # the session sleeps between the two tasks
    assert Session.objects.get(pk=agent.session_id).lifecycle == "sleeping"
    native = Session.objects.get(pk=agent.session_id).native_ref
    second = task_runs.submit_task(owner=operator, prompt="What was the code word?",
                                   instance=agent)
    assert second.session_id == first.session_id
    host = _serve(agent.session_id)
    try:
        assert _settled(second.pk).result == "It was OSPREY."
    finally:
        host.join(120)
    assert Session.objects.get(pk=agent.session_id).native_ref == native
    # the second task's model request carries the first task's exchange
    last = str(model_server.tool_requests()[-1].body)
    assert "Remember the code word OSPREY." in last
    assert "Noted: the code word is OSPREY." in last
    assert "What was the code word?" in last


def test_the_run_follows_its_turn_through_a_lost_host(session_dirs, openai_provider,
                                                       operator):
    """Running with the turn's start; a host lost mid-turn cancels the turn but queues its
    continuation, so the run stays running; the continuation's end settles it."""
    from runtimes import events as rt
    from sessions import timeline
    from sessions.models import Turn

    run = task_runs.submit_task(owner=operator, prompt="long job", runtime="codex",
                                model="gpt-5.5")
    turn = Turn.objects.get(session=run.session)
    timeline.start_turn(run.session_id, turn.pk)
    assert TaskRun.objects.get(pk=run.pk).state == "running"
    assert timeline.reconcile_running(run.session_id) == 1
    outbox.drain(seconds=2)
    assert TaskRun.objects.get(pk=run.pk).state == "running"
    continuation = Turn.objects.get(session=run.session, key=f"task:{run.pk}:resumed")
    timeline.start_turn(run.session_id, continuation.pk)
    timeline.record(run.session_id, continuation.pk, [
        rt.MessageCompleted(text="working on it"), rt.MessageCompleted(text="All done."),
        rt.TurnCompleted()])
    outbox.drain(seconds=2)
    settled = TaskRun.objects.get(pk=run.pk)
    assert (settled.state, settled.result) == ("succeeded", "All done.")
    assert task_runs.wait_for_result(run.pk, 1).state == "succeeded"


def test_a_failed_turn_fails_its_run_with_the_turn_s_words(session_dirs, openai_provider,
                                                           operator):
    from runtimes import events as rt
    from sessions import timeline
    from sessions.models import Turn

    run = task_runs.submit_task(owner=operator, prompt="x", runtime="codex", model="gpt-5.5")
    turn = Turn.objects.get(session=run.session)
    timeline.start_turn(run.session_id, turn.pk)
    timeline.record(run.session_id, turn.pk, [rt.TurnFailed(code="rate_limited",
                                                             message="slow down")])
    outbox.drain(seconds=2)
    failed = TaskRun.objects.get(pk=run.pk)
    assert (failed.state, failed.error_code, failed.error_message) == \
        ("failed", "rate_limited", "slow down")
    outbox.drain(seconds=1)  # a replayed effect changes nothing
    assert TaskRun.objects.get(pk=run.pk).ended_at == failed.ended_at


@pytest.mark.host_idle(60)
def test_a_tasks_session_sleeps_as_soon_as_its_turn_has_settled(session_dirs, model_server,
                                                                openai_provider, operator):
    """A one-turn task keeps no runtime awake for the idle floor (60 s here, as in
    production): its host ends its runtime once the turn has settled, and the session
    wakes again for a follow-up."""
    require_runtime("pi")
    model_server.script(Text("Done at once."), Text("Again."))
    run = task_runs.submit_task(owner=operator, prompt="Quick one", runtime="pi",
                                model="scripted-model", provider="scripted")
    assert Session.objects.get(pk=run.session_id).idle_timeout_s == 0
    for _turn in range(2):
        outcome: dict = {}
        host = threading.Thread(
            target=lambda box=outcome: box.setdefault("v", run_host(run.session_id)))
        host.start()
        host.join(40)  # well inside the 60 s floor an interactive session waits
        assert not host.is_alive() and outcome.get("v") == "slept"
        assert Session.objects.get(pk=run.session_id).lifecycle == "sleeping"
        services.post_message(run.session_id, "and again?")
    assert _settled(run.pk).result == "Done at once."
