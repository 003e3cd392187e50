"""The session host answers every command: what does not apply now is kept until it does
or answered on the timeline with why not; the sleep rule is fed what the database says."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from runtimes.events import PermissionRequested
from sessions import control, services, timeline
from sessions.host import sleep_facts
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.support.model_server import Text
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]


def _session(idle_timeout_s=300):
    # a long idle timeout: only a command applied by the host ends these hosts in time
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=idle_timeout_s)
    return Session.objects.get(pk=session.pk)


def _host(session_id):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("outcome",
                                                                run_host(session_id)))
    thread.start()
    return thread, result


def _refusals(session_id):
    return [e.payload for e in TimelineEvent.objects.filter(
        session_id=session_id, type="control.refused").order_by("seq")]


def test_a_sleep_that_reaches_the_host_during_a_turn_applies_when_the_turn_ends(
        openai_provider, session_dirs, model_server):
    session = _session()
    model_server.script(Text("slow", delay=3))
    services.post_message(session.pk, "take a moment")
    thread, result = _host(session.pk)
    try:
        wait_for(lambda: timeline.turn_in_flight(session.pk), timeout=60)
        with pytest.raises(services.Conflict) as refused:  # the API says why not now
            services.sleep(session.pk)
        assert refused.value.code == "busy" and refused.value.status == 409
        # the same request racing the check (sent just before the input arrived)
        control.send(session.pk, "sleep")
    finally:
        thread.join(90)
    assert result["outcome"] == "slept"
    session.refresh_from_db()
    assert session.lifecycle == "sleeping" and session.sleep_reason == "manual"
    assert TimelineEvent.objects.filter(session=session, type="turn.completed").count() == 1


def test_answers_and_interrupts_for_ended_turns_are_refused_on_the_timeline(
        openai_provider, session_dirs, model_server):
    session = _session()
    model_server.script(Text("one"), Text("two", delay=3))
    services.post_message(session.pk, "first")
    thread, result = _host(session.pk)
    try:
        wait_for(lambda: TimelineEvent.objects.filter(session=session,
                                                      type="turn.completed").exists(), 120)
        # idle: a permission answer and a question answer whose turn has ended
        control.send(session.pk, "permission", request_id="p-1", option_id="allow")
        control.send(session.pk, "answer", request_id="q-1", answers={"a": "b"})
        wait_for(lambda: len(_refusals(session.pk)) == 2, timeout=120)
        # during turn 2, an interrupt meant for turn 1 does not cut turn 2 short
        services.post_message(session.pk, "second")
        wait_for(lambda: (t := timeline.turn_in_flight(session.pk)) and t.seq == 2, 120)
        control.send(session.pk, "interrupt", turn=1)
        wait_for(lambda: TimelineEvent.objects.filter(session=session,
                                                      type="turn.completed").count() == 2, 120)
        services.sleep(session.pk)
    finally:
        thread.join(90)
    assert result["outcome"] == "slept"
    refusals = _refusals(session.pk)
    assert [(r["op"], r["reason"]) for r in refusals] == [
        ("permission", "the turn that asked has ended"),
        ("answer", "the turn that asked has ended"),
        ("interrupt", "the turn had already ended")]
    assert not TimelineEvent.objects.filter(session=session, type="turn.cancelled").exists()
    # an interrupt with nothing in flight is refused to the caller at once
    with pytest.raises(services.Conflict) as refused:
        services.interrupt(session.pk)
    assert refused.value.code == "no_turn_in_flight"


def test_the_sleep_rule_reads_the_queue_the_turn_and_the_prompts(openai_provider,
                                                                   session_dirs):
    session = _session()
    assert sleep_facts(session.pk) == {"queue_empty": True, "turn_in_flight": False,
                                       "pending_permission": False}
    turn = services.post_message(session.pk, "queued")
    assert sleep_facts(session.pk)["queue_empty"] is False
    timeline.start_turn(session.pk, turn.pk)
    timeline.record(session.pk, turn.pk, [_permission("r-1")])
    assert sleep_facts(session.pk) == {"queue_empty": True, "turn_in_flight": True,
                                       "pending_permission": True}


def _permission(request_id):
    return PermissionRequested(request_id=request_id, title="run a command")


def test_a_starting_worker_takes_back_only_leases_whose_host_died_here(openai_provider,
                                                                         session_dirs):
    import os
    import subprocess
    import sys
    from datetime import timedelta

    from django.utils import timezone

    from sessions.tasks import reclaim_dead_leases

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    later = timezone.now() + timedelta(seconds=30)
    dead, alive, elsewhere = (_session() for _ in range(3))
    Session.objects.filter(pk=dead.pk).update(
        lease_owner=f"here:{gone}:a", lease_host="here", lease_expires_at=later)
    Session.objects.filter(pk=alive.pk).update(
        lease_owner=f"here:{os.getpid()}:b", lease_host="here", lease_expires_at=later)
    Session.objects.filter(pk=elsewhere.pk).update(
        lease_owner=f"there:{gone}:c", lease_host="there", lease_expires_at=later)
    assert reclaim_dead_leases("here") == 1
    rows = {s.pk: s for s in Session.objects.all()}
    assert rows[dead.pk].lease_expires_at <= timezone.now()  # free for a new host now
    assert rows[alive.pk].lease_expires_at == later  # its host may still run: untouched
    assert rows[elsewhere.pk].lease_expires_at == later  # another machine's: its own


def test_no_command_is_lost_while_turns_end_one_after_another(
        openai_provider, session_dirs, model_server):
    """Commands that arrive as turns end (each turn's reader of the control channel stops
    there) are answered by the turn or by the host after it, every one: a reader cancelled
    mid-pop once dropped what Redis had already handed it, and a goal command lost so left
    its goal running."""
    session = _session()
    turns, commands = 12, 60
    model_server.script(*[Text(f"answer {n}", delay=0.05) for n in range(turns)])
    for n in range(turns):
        services.post_message(session.pk, f"input {n}")
    thread, result = _host(session.pk)
    try:
        wait_for(lambda: timeline.turn_in_flight(session.pk), timeout=60)
        for n in range(commands):  # interrupts for turns that never were: each is refused
            control.send(session.pk, "interrupt", turn=10_000 + n)
            time.sleep(0.02)
        wait_for(lambda: TimelineEvent.objects.filter(
            session=session, type="turn.completed").count() == turns, 120)
        wait_for(lambda: len(_refusals(session.pk)) >= commands, timeout=30)
        services.sleep(session.pk)
    finally:
        thread.join(90)
    assert result["outcome"] == "slept"
    answered = sorted(r["turn"] for r in _refusals(session.pk) if r["op"] == "interrupt")
    assert answered == [10_000 + n for n in range(commands)]
    assert not TimelineEvent.objects.filter(session=session, type="turn.cancelled").exists()


_TERMINALS = ("turn.completed", "turn.failed", "turn.cancelled")


def test_an_answer_sent_the_moment_a_turn_is_seen_ended_is_refused(
        openai_provider, session_dirs, model_server):
    """The turn's reader of the control channel stops only at its end marker, a moment
    after the turn's terminal is stored: an answer sent in between is refused like one
    sent to an idle host, never handed to a runtime whose turn is over (and so lost)."""
    session = _session()
    turns = 8
    model_server.script(*[Text(f"answer {n}") for n in range(turns)])
    services.post_message(session.pk, "input 0")
    thread, result = _host(session.pk)
    try:
        for n in range(turns):
            if n:
                services.post_message(session.pk, f"input {n}")
            wait_for(lambda n=n: TimelineEvent.objects.filter(
                session=session, type__in=_TERMINALS).count() == n + 1, 60, interval=0.002)
            control.send(session.pk, "permission", request_id=f"p-{n}", option_id="allow")
        with contextlib.suppress(TimeoutError):  # the assertion below says which is missing
            wait_for(lambda: len(_refusals(session.pk)) == turns, timeout=30)
        services.sleep(session.pk)
    finally:
        thread.join(90)
    assert result["outcome"] == "slept"
    assert [r["request_id"] for r in _refusals(session.pk)] == [f"p-{n}" for n in range(turns)], \
        list(TimelineEvent.objects.filter(session=session).order_by("seq")
             .values_list("type", "turn_id", "payload"))
