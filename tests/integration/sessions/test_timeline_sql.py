"""The timeline writer's plain SQL (sessions/timeline_sql.py) is the one path on PostgreSQL
and SQLite alike, made from the model: a field added to Session is read back with the
ORM's own conversion, and a turn is queued, started and written as before."""

from __future__ import annotations

import pytest
from django.db import models

from runtimes import events as rt
from sessions import timeline, timeline_sql
from sessions.models import Session, TimelineEvent, Turn
from tests.support.grown_model import grown


def _forget() -> None:
    for cached in (timeline_sql._sql, timeline_sql._converters, timeline_sql._input_sql):
        cached.cache_clear()


@pytest.fixture
def added_fields():
    """Session grown by two fields (a boolean and a JSON default) for one test."""
    with grown(Session, {"flagged": models.BooleanField(default=False),
                         "labels": models.JSONField(default=list)}, _forget) as fields:
        yield fields


@pytest.mark.django_db(transaction=True)
def test_a_field_added_to_session_is_read_and_a_turn_still_runs(added_fields):
    session = Session.objects.create(runtime="pi", workdir="/tmp/w", name="grown",
                                     labels=["a", "b"])
    turn, created = timeline.enqueue_input(session.pk, "hi", key="k1")
    assert created and turn.seq == 1
    timeline.start_turn(session.pk, turn.pk)
    timeline.record(session.pk, turn.pk, [rt.MessageDelta(text="he"),
                                          rt.MessageCompleted(text="hello"),
                                          rt.TurnCompleted()])
    read, _ = timeline_sql.locked(session.pk, turn.pk, with_last=True)
    assert (read.flagged, read.labels) == (False, ["a", "b"])  # as the ORM converts them
    assert (read.turn_seq, read.turn_key, bool(read.has_task_runs)) == (1, "k1", False)
    assert read.last_event_seq == TimelineEvent.objects.filter(session=session).count()
    assert Turn.objects.get(pk=turn.pk).state == "completed"
    again, created = timeline.enqueue_input(session.pk, "hi", key="k1")
    assert (again.pk, created) == (turn.pk, False)  # the key is read in the same path


@pytest.mark.django_db
def test_an_unknown_session_does_not_exist():
    with pytest.raises(Session.DoesNotExist):
        timeline_sql.locked(10**9, None, with_last=True)
    with pytest.raises(Session.DoesNotExist):
        timeline_sql.locked_for_input(10**9, "k")
