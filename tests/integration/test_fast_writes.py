"""amux_common.fast_writes stores what the ORM would store, with the same statements on
PostgreSQL and SQLite: ids, defaults and auto-dates, the upsert of a pending effect, and an
update that applies only while its guard holds."""

from __future__ import annotations

import pytest
from django.db import models
from django.db.models import Value
from django.utils import timezone

from amux_common import fast_writes
from effects import outbox
from effects.models import Effect, EffectKind
from sessions.models import Session, TimelineEvent, Turn, TurnState
from tests.support.grown_model import grown

pytestmark = pytest.mark.django_db


@pytest.fixture
def session():
    return Session.objects.create(runtime="pi", workdir="/tmp/w", name="fast")


def test_insert_gives_ids_and_the_orms_values(session):
    turn = Turn(session=session, seq=1, key="k1", input={"text": "hé"}, origin={"via": "api"})
    fast_writes.insert([turn])
    events = [TimelineEvent(session=session, seq=n, turn=turn if n else None, type="t",
                            payload={"n": n, "text": "ü\n"}) for n in range(2)]
    fast_writes.insert(events)

    stored = Turn.objects.get(pk=turn.pk)
    assert (stored.key, stored.input, stored.origin, stored.state) == (
        "k1", {"text": "hé"}, {"via": "api"}, TurnState.QUEUED)  # the field's default
    assert stored.created_at is not None and not turn._state.adding
    rows = list(TimelineEvent.objects.filter(session=session).order_by("seq"))
    assert [r.pk for r in rows] == [e.pk for e in events]
    assert [r.payload for r in rows] == [{"n": 0, "text": "ü\n"}, {"n": 1, "text": "ü\n"}]
    assert rows[1].turn_id == turn.pk and rows[0].at is not None


def test_the_upsert_replaces_a_pending_effect_in_place():
    first = outbox.enqueue(EffectKind.TURN_ENDED, "turn:1", {"state": "completed"})
    again = outbox.enqueue(EffectKind.TURN_ENDED, "turn:1", {"state": "failed"})
    assert again.pk == first.pk
    assert Effect.objects.filter(key="turn:1").count() == 1
    assert Effect.objects.get(pk=first.pk).payload == {"state": "failed"}


def test_an_update_applies_only_while_its_guard_holds(session):
    turn = Turn.objects.create(session=session, seq=1, key="k1", input={})
    before = Session.objects.get(pk=session.pk).updated_at

    opened = Turn(pk=turn.pk, state=TurnState.RUNNING, started_at=timezone.now())
    assert fast_writes.update(opened, ["state", "started_at"],
                              only_if=("state", [TurnState.QUEUED]))
    assert not fast_writes.update(opened, ["state", "started_at"],
                                  only_if=("state", [TurnState.QUEUED]))  # no longer queued

    ended = Turn(pk=turn.pk, state=TurnState.COMPLETED, ended_at=timezone.now())
    assert fast_writes.update(ended, ["state", "ended_at"],
                              unless=("state", [TurnState.COMPLETED, TurnState.FAILED]))
    late = Turn(pk=turn.pk, state=TurnState.FAILED, ended_at=timezone.now())
    assert not fast_writes.update(late, ["state", "ended_at"],
                                  unless=("state", [TurnState.COMPLETED, TurnState.FAILED]))
    assert Turn.objects.get(pk=turn.pk).state == TurnState.COMPLETED

    session.lifecycle = "idle"
    assert fast_writes.update(session, ["lifecycle", "updated_at"])
    stored = Session.objects.get(pk=session.pk)
    assert stored.lifecycle == "idle" and stored.updated_at > before  # auto_now


@pytest.fixture
def grown_event():
    """TimelineEvent grown by a field with a Python default and two with only a database
    default, in the model and its table, for one test."""
    with grown(TimelineEvent, {"flagged": models.BooleanField(default=False),
                               "weight": models.IntegerField(db_default=3),
                               "lane": models.CharField(max_length=8,
                                                        db_default=Value("slow"))},
               fast_writes._statement.cache_clear) as fields:
        yield fields


@pytest.mark.django_db(transaction=True)
def test_a_field_added_to_the_model_is_written_as_the_orm_writes_it(grown_event):
    session = Session.objects.create(runtime="pi", workdir="/tmp/w", name="grown")
    events = [TimelineEvent(session=session, seq=1, type="t", payload={}),
              TimelineEvent(session=session, seq=2, type="t", payload={}, weight=9),
              TimelineEvent(session=session, seq=3, type="t", payload={}, flagged=True)]
    fast_writes.insert(events)
    by_orm = TimelineEvent.objects.create(session=session, seq=4, type="t", payload={})
    rows = TimelineEvent.objects.filter(session=session).order_by("seq")
    assert [e.pk for e in events] + [by_orm.pk] == [r.pk for r in rows]
    assert list(rows.values_list("flagged", "weight", "lane")) == [
        (False, 3, "slow"), (False, 9, "slow"), (True, 3, "slow"), (False, 3, "slow")]
