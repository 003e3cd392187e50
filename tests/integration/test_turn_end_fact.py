"""The turn-ended fact goes from sessions to tickets through the outbox (issue 11, item 10):
written by the canonical timeline in the terminal event's own transaction, run by the real
drainer through the handler tickets registered. The process-level crash is proven in
tests/e2e/tickets/test_turn_end_crash.py."""

from __future__ import annotations

import pytest
from django.db import transaction

from effects import outbox
from effects.models import Effect
from intake.models import Source, Thread, Trigger
from runtimes import events as rt
from sessions import timeline
from sessions.models import Session, Turn
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import Assignment

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker_session():
    """A ticket whose running assignment works in a session (no runtime needed here)."""
    source = Source.objects.create(kind="webchat", slug="team", name="Team chat")
    thread = Thread.objects.create(source=source, key="general:1", title="Login crash")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id="m1", scope="chat", actor="octocat",
        text="please fix the login crash", decision="explicit", strength="explicit",
        policy_version="v1")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the login crash")
    session = Session.objects.create(runtime="pi", workdir="/tmp/w", name="worker-1")
    assignment = Assignment.objects.get(ticket=ticket)
    executor.assignment_started(assignment_id=assignment.pk, session_id=session.pk)
    Effect.objects.all().delete()  # the dispatch is not what this test is about
    return session, assignment


def running_turn(session):
    turn, _ = timeline.enqueue_input(session.pk, "fix it")
    timeline.start_turn(session.pk, turn.pk)
    return turn


def test_the_fact_is_written_with_the_terminal_event_and_reaches_the_ticket(worker_session):
    session, assignment = worker_session
    turn = running_turn(session)
    timeline.record(session.pk, turn.pk, [rt.TurnCompleted()])
    turn.refresh_from_db()
    facts = {row.key: row.payload for row in Effect.objects.filter(kind="session.turn_ended")}
    stated = {"session": session.pk, "turn": turn.pk, "turn_key": turn.key,
              "state": "completed", "error_code": "", "ended_at": turn.ended_at.isoformat(),
              "task_runs": False, "fact": "session.turn_ended"}
    # one row per subscriber that wants it: tickets and goals (a session with no task runs)
    assert facts == {f"tickets:turn:{turn.pk}": {**stated, "subscriber": "tickets"},
                     f"goals:turn:{turn.pk}": {**stated, "subscriber": "goals"}}
    assignment.refresh_from_db()
    assert assignment.last_turn_at is None, "nothing reached the ticket before a drain"

    assert outbox.drain(seconds=10) == 2
    assignment.refresh_from_db()
    assert assignment.state == "running" and assignment.last_turn_at == turn.ended_at
    assert not Effect.objects.exists()


def test_a_failed_turn_fails_the_assignment_with_its_code(worker_session):
    session, assignment = worker_session
    turn = running_turn(session)
    timeline.record(session.pk, turn.pk, [rt.TurnFailed(code="provider_error", message="x")])
    outbox.drain(seconds=10)
    assignment.refresh_from_db()
    assert (assignment.state, assignment.end_reason) == ("failed", "provider_error")


def test_a_terminal_event_rolled_back_leaves_no_fact(worker_session):
    session, _ = worker_session
    turn = running_turn(session)
    with pytest.raises(RuntimeError), transaction.atomic():
        timeline.record(session.pk, turn.pk, [rt.TurnCompleted()])
        raise RuntimeError("the caller's transaction failed")
    assert Turn.objects.get(pk=turn.pk).state == "running"
    assert not Effect.objects.exists()


def test_a_late_duplicate_terminal_writes_no_second_fact(worker_session):
    session, _ = worker_session
    turn = running_turn(session)
    timeline.record(session.pk, turn.pk, [rt.TurnCompleted()])
    timeline.record(session.pk, turn.pk, [rt.TurnFailed(code="late")])
    assert sorted(Effect.objects.values_list("payload__subscriber", "payload__state")) == [
        ("goals", "completed"), ("tickets", "completed")]


def test_the_end_of_a_session_that_is_no_ticket_s_worker_is_drained_as_a_no_op():
    session = Session.objects.create(runtime="pi", workdir="/tmp/w", name="chat")
    turn = running_turn(session)
    timeline.record(session.pk, turn.pk, [rt.TurnCompleted()])
    assert outbox.drain(seconds=10) == 2  # tickets' row and goals' row, both no-ops
    assert not Effect.objects.exists()
