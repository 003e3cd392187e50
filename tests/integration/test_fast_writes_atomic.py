"""fast_writes.atomic: a transaction whose BEGIN rides with its first statements and whose
COMMIT rides with its last on PostgreSQL (two round trips where the ORM's are four), with
everything else Django's atomic block promises: all or nothing, on_commit after the commit,
a nested block part of the outer transaction. Elsewhere it is Django's block as it is."""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest
from django.db import IntegrityError, connection, connections, transaction
from psycopg.pq import TransactionStatus

from amux_common import fast_writes
from runtimes import events as rt
from sessions import timeline
from sessions.models import Session, TimelineEvent, Turn

pytestmark = pytest.mark.django_db(transaction=True)
PG = connection.vendor == "postgresql"


@contextlib.contextmanager
def wire():
    """What went to the database, one entry per round trip, the BEGIN and COMMIT psycopg
    sends in round trips of their own included."""
    trips: list[str] = []
    db = connections["default"]

    def idle() -> bool:
        return db.connection.pgconn.transaction_status == TransactionStatus.IDLE

    def watch(execute, sql, params, many, context):
        if PG and not db.connection.autocommit and idle():
            trips.append("BEGIN (psycopg)")
        trips.append(sql)
        return execute(sql, params, many, context)

    commit, rollback = db._commit, db._rollback

    def counted(fn, name):
        def run():
            if PG and db.connection is not None and not idle():
                trips.append(f"{name} (psycopg)")
            return fn()
        return run

    with db.execute_wrapper(watch), \
            mock.patch.object(db, "_commit", counted(commit, "COMMIT")), \
            mock.patch.object(db, "_rollback", counted(rollback, "ROLLBACK")):
        yield trips


@pytest.fixture
def session():
    return Session.objects.create(runtime="pi", workdir="/tmp/w", name="trips")


def test_each_transaction_of_a_turn_is_two_round_trips(session):
    with wire() as queued:
        turn, created = timeline.enqueue_input(session.pk, "hi", key="k1")
    with wire() as started:
        timeline.start_turn(session.pk, turn.pk)
    with wire() as progress:
        timeline.record(session.pk, turn.pk, [rt.MessageDelta(text="he"),
                                              rt.MessageDelta(text="llo")])
    with wire() as ended:
        timeline.record(session.pk, turn.pk, [rt.MessageCompleted(text="hello"),
                                              rt.TurnCompleted()])
    assert created
    if PG:
        for trips in (queued, started, progress, ended):
            # BEGIN with the lock (and the writes that need it held), COMMIT with the rows
            assert len(trips) == 2, trips
            assert trips[0].startswith("BEGIN; ") and trips[1].endswith("; COMMIT"), trips
        assert progress[0].startswith("BEGIN; SET LOCAL synchronous_commit TO OFF; ")
        assert "synchronous_commit" not in ended[0]  # a terminal stays durable
    turn.refresh_from_db()
    assert turn.state == "completed"
    assert list(TimelineEvent.objects.filter(session=session).order_by("seq")
                .values_list("seq", "type")) == [
        (1, "turn.queued"), (2, "turn.started"), (3, "message.delta"), (4, "message.delta"),
        (5, "message.completed"), (6, "turn.completed")]
    # the connection is left as Django expects it outside a block
    assert connection.get_autocommit() and not connection.in_atomic_block
    if PG:
        assert connection.connection.autocommit
        assert connection.connection.pgconn.transaction_status == TransactionStatus.IDLE


def test_on_commit_runs_after_the_commit_that_rode_with_the_rows(session):
    seen = []

    def look() -> None:  # on another connection: only what was committed is seen
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM agent_sessions_turn WHERE "
                               "session_id = %s", [session.pk])
                seen.append(cursor.fetchone()[0])
        finally:
            other.close()

    timeline.enqueue_input(session.pk, "hi", queued_with=lambda _s: transaction.on_commit(look))
    assert seen == [1]


def test_a_failed_statement_rolls_back_the_whole_transaction(session):
    first = Turn(session=session, seq=1, key="a")
    clash = Turn(session=session, seq=1, key="b")  # the same (session, seq)
    with pytest.raises(IntegrityError), fast_writes.atomic():
        fast_writes.send([fast_writes.insert_statement([first])])
        fast_writes.send([fast_writes.insert_statement([clash])], last=True)
    assert not Turn.objects.filter(session=session).exists()
    assert Session.objects.filter(pk=session.pk).exists()  # the connection works on


def test_an_error_before_the_commit_is_sent_rolls_back(session):
    with pytest.raises(ValueError), fast_writes.atomic():
        fast_writes.send([fast_writes.insert_statement([Turn(session=session, seq=1,
                                                             key="a")])])
        raise ValueError("changed my mind")
    assert not Turn.objects.filter(session=session).exists()


@pytest.mark.skipif(not PG, reason="the COMMIT rides with the last statements on PostgreSQL")
def test_a_write_after_the_commit_was_sent_is_refused(session):
    with pytest.raises(RuntimeError, match="after the transaction's COMMIT"), \
            fast_writes.atomic():
        fast_writes.send([fast_writes.insert_statement([Turn(session=session, seq=1,
                                                             key="a")])], last=True)
        Session.objects.filter(pk=session.pk).update(name="late")
    assert Turn.objects.filter(session=session).count() == 1  # committed with its COMMIT
    assert Session.objects.get(pk=session.pk).name == "trips"  # the stray write: not


@pytest.mark.skipif(not PG, reason="synchronous_commit is PostgreSQL's")
def test_relaxed_holds_for_its_own_transaction_only(session):
    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    with fast_writes.atomic(relaxed=True):
        fast_writes.send([fast_writes.insert_statement([Turn(session=session, seq=1,
                                                             key="a")])])
        inside = setting()
    assert (inside, setting()) == ("off", "on")


def test_inside_another_transaction_it_is_part_of_that_one(session):
    with wire() as trips, pytest.raises(ValueError), transaction.atomic():
        timeline.enqueue_input(session.pk, "hi")
        raise ValueError("the caller's transaction fails")
    assert not Turn.objects.filter(session=session).exists()
    if PG:
        assert not any(t.startswith("BEGIN;") or t.endswith("; COMMIT") for t in trips), trips
