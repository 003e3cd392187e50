"""What a turn costs the database (issue 13, item 3: amux adds at most 25 ms to a turn): the
statements each step of a turn sends, counted on the real database, and the semantics the
leaner steps keep (one terminal per turn, a late terminal kept as provenance, gapless seqs).
bench/turn_overhead.py measures the milliseconds."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext

from effects.models import Effect
from runtimes import events as rt
from sessions import timeline
from sessions.models import Session, TimelineEvent, Turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def session():
    return Session.objects.create(runtime="pi", workdir="/tmp/w", name="statements")


def statements(fn, *args, **kwargs) -> tuple[list[str], object]:
    """What ``fn`` sent, one entry per round trip (the savepoints of the test's own
    transaction aside), what runs after its commit included: a read after the write there
    (e.g. for the metrics) counts too."""
    with CaptureQueriesContext(connection) as captured, \
            TestCase.captureOnCommitCallbacks(execute=True):
        result = fn(*args, **kwargs)
    sent = [q["sql"] for q in captured.captured_queries
            if not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    return sent, result


def usage(total: int) -> rt.UsageObserved:
    return rt.UsageObserved(last={"total_tokens": 10}, cumulative={
        "cumulative_input_tokens": total - 5, "cumulative_output_tokens": 5,
        "cumulative_total_tokens": total})


def test_each_step_of_a_turn_sends_only_what_it_must(session):
    # elsewhere than on PostgreSQL the lock and the reads beside it are two round trips, and
    # the writes sent together (fast_writes.send) one statement each
    apart = int(connection.vendor != "postgresql")
    pg = not apart
    sent, (turn, created) = statements(timeline.enqueue_input, session.pk, "hi", key="k1")
    assert created
    # lock, then the last seqs and the key (one round trip on PostgreSQL); the turn and its
    # turn.queued event (one round trip on PostgreSQL), the event naming the new turn
    assert len(sent) == (2 if pg else 4), sent
    queued = TimelineEvent.objects.get(session=session, type="turn.queued")
    assert (queued.turn_id, queued.seq, turn.seq) == (turn.pk, 1, 1)

    sent, _ = statements(timeline.start_turn, session.pk, turn.pk)
    # lock (with the turn's seq and the last seq) and the turn, if still queued (its queued
    # time comes back with it: no read after the commit), one round trip on PostgreSQL;
    # the session with the event, one round trip
    assert len(sent) == (2 if pg else 5), sent
    if pg:
        assert '; UPDATE "agent_sessions_turn"' in sent[0], sent
        assert sent[-1].startswith('UPDATE "agent_sessions_session"') \
            and '; INSERT INTO "agent_sessions_timelineevent"' in sent[-1], sent

    # the runtime's own turn.started carries nothing new: no transaction at all
    assert statements(timeline.record, session.pk, turn.pk, [rt.TurnStarted()])[0] == []

    sent, stored = statements(timeline.record, session.pk, turn.pk,
                              [rt.MessageDelta(text="he"), rt.MessageDelta(text="llo")])
    # lock (with the turn's seq, last seq); one INSERT
    assert len(sent) == 2 + apart, sent
    if connection.vendor == "postgresql":
        # the progress batch's relaxed commit rides in the lock's round trip
        assert sent[0].startswith("SET LOCAL synchronous_commit TO OFF;"), sent
    assert [e["turn"] for e in stored] == [turn.seq, turn.seq]

    sent, stored = statements(timeline.record, session.pk, turn.pk,
                              [usage(100), rt.TurnCompleted()])
    # lock with the last seq and the turn, if not ended (its start time comes back with
    # it), one round trip on PostgreSQL; the day's usage (+ its first row); then one round
    # trip: the turn-ended fact, the session, one INSERT for both events; nothing read
    # after the commit
    assert len(sent) == (4 if pg else 8), sent
    if pg:
        assert sent[-1].startswith('INSERT INTO "effects_effect"') and \
            '; UPDATE "agent_sessions_session"' in sent[-1] and \
            '; INSERT INTO "agent_sessions_timelineevent"' in sent[-1], sent
    assert [e["type"] for e in stored] == ["usage.observed", "turn.completed"]

    turn.refresh_from_db()
    session.refresh_from_db()
    assert (turn.state, session.lifecycle) == ("completed", "idle")
    seqs = list(TimelineEvent.objects.filter(session=session).values_list("seq", flat=True)
                .order_by("seq"))
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_posted_key_is_idempotent_and_numbers_stay_gapless(session):
    first, created = timeline.enqueue_input(session.pk, "one", key="same")
    again, created_again = timeline.enqueue_input(session.pk, "one", key="same")
    second, _ = timeline.enqueue_input(session.pk, "two")
    assert (created, created_again, again.pk) == (True, False, first.pk)
    assert (first.seq, second.seq) == (1, 2)
    assert list(TimelineEvent.objects.filter(session=session).values_list("type", flat=True)
                .order_by("seq")) == ["turn.queued", "turn.queued"]


def test_two_terminals_in_one_batch_end_the_turn_once(session):
    turn, _ = timeline.enqueue_input(session.pk, "hi")
    timeline.start_turn(session.pk, turn.pk)
    stored = timeline.record(session.pk, turn.pk, [
        rt.TurnCompleted(), rt.TurnFailed(code="late", message="after the end")])
    assert [e["type"] for e in stored] == ["turn.completed"]
    accepted = TimelineEvent.objects.get(turn=turn, type="turn.completed")
    assert [late["type"] for late in accepted.provenance["late"]] == ["turn.failed"]
    assert sorted(Effect.objects.filter(kind="session.turn_ended").values_list(
        "key", flat=True)) == [f"goals:turn:{turn.pk}", f"tickets:turn:{turn.pk}"]
    turn.refresh_from_db()
    assert turn.state == "completed"


def test_a_turn_that_is_not_queued_does_not_open_again(session):
    turn, _ = timeline.enqueue_input(session.pk, "hi")
    assert timeline.start_turn(session.pk, turn.pk)
    before = Turn.objects.get(pk=turn.pk).started_at
    assert timeline.start_turn(session.pk, turn.pk) == []
    assert Turn.objects.get(pk=turn.pk).started_at == before
    assert TimelineEvent.objects.filter(turn=turn, type="turn.started").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_writer_that_waited_for_the_lock_numbers_after_what_the_holder_committed():
    """The last seq is read once the lock is held (in the same round trip as the lock, as a
    statement of its own): a batch that waited for another writer numbers after its rows."""
    import threading
    import time

    from django.db import transaction

    session = Session.objects.create(runtime="pi", workdir="/tmp/w", name="locks")
    turn, _ = timeline.enqueue_input(session.pk, "hi")
    timeline.start_turn(session.pk, turn.pk)
    holding, release, stored = threading.Event(), threading.Event(), []

    def holder():
        try:
            with transaction.atomic():
                timeline.note(session.pk, "held", {})  # locks the row, writes an event
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    def writer():
        try:
            stored.append(timeline.record(session.pk, turn.pk, [rt.MessageDelta(text="x")]))
        finally:
            connection.close()

    held = threading.Thread(target=holder)
    held.start()
    assert holding.wait(10)
    waiting = threading.Thread(target=writer)
    waiting.start()
    time.sleep(0.3)
    assert not stored, "the batch waits for the lock"
    release.set()
    held.join(10)
    waiting.join(10)
    assert [e["seq"] for e in stored[0]] == [4]  # queued 1, started 2, held 3
    seqs = list(TimelineEvent.objects.filter(session=session).values_list("seq", flat=True)
                .order_by("seq"))
    assert seqs == [1, 2, 3, 4]
