"""An installation upgraded across the outbox's move from `tickets` to `effects` keeps its
rows: written under the old schema (tickets' migrations up to 0007, the model
`tickets.Effect` in table `tickets_effect`), then migrated forward, they are the same rows
of `effects.Effect` (table `effects_effect`), and the outbox drains them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from tests.support.old_schema import migrate, migrate_to_latest, old_schema_at

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("tickets", "0008_assignment_failure"), ("effects", None)]


@pytest.fixture
def old_schema():
    with old_schema_at(BEFORE) as apps:
        yield apps


@pytest.fixture
def handlers():
    saved = outbox.handlers()
    outbox._handlers.clear()
    yield outbox._handlers
    outbox._handlers.clear()
    outbox._handlers.update(saved)


def test_rows_written_before_the_move_survive_it_and_still_run(old_schema, handlers):
    OldEffect = old_schema.get_model("tickets", "Effect")
    assert OldEffect._meta.db_table == "tickets_effect"
    assert "effects_effect" not in connection.introspection.table_names()
    now = timezone.now()
    relay = OldEffect.objects.create(
        kind="relay", key="ticket:1:report", payload={"thread": 7, "text": "On it."},
        channel="gh:octo/app#7", due_at=now)
    dead = OldEffect.objects.create(
        kind="deliver", key="input-9", payload={"n": 9}, state="dead", attempts=15,
        last_error="RuntimeError: boom", due_at=now - timedelta(hours=1))
    view = Permission.objects.get(codename="view_effect")
    assert (view.content_type.app_label, view.content_type.model) == ("tickets", "effect")

    migrate_to_latest()

    assert Effect._meta.db_table == "effects_effect"
    assert "tickets_effect" not in connection.introspection.table_names()
    rows = {row.pk: row for row in Effect.objects.all()}
    assert set(rows) == {relay.pk, dead.pk}
    assert (rows[relay.pk].kind, rows[relay.pk].key, rows[relay.pk].payload,
            rows[relay.pk].channel, rows[relay.pk].state) == (
        "relay", "ticket:1:report", {"thread": 7, "text": "On it."}, "gh:octo/app#7",
        "pending")
    assert (rows[dead.pk].state, rows[dead.pk].attempts, rows[dead.pk].last_error) == (
        "dead", 15, "RuntimeError: boom")
    # The permission granted on the old model is the new model's (its content type moved).
    view.refresh_from_db()
    assert view.content_type == ContentType.objects.get_for_model(Effect)

    ran = []
    outbox.register("relay", replace=True)(lambda effect_id, payload: ran.append(effect_id))
    outbox.register("deliver", replace=True)(lambda effect_id, payload: ran.append(effect_id))
    assert outbox.retry_dead([dead.pk]) == 1
    later = outbox.enqueue("session.turn_ended", "turn:1", {"session": 1, "turn": 1,
                                                            "state": "completed",
                                                            "error_code": ""})
    assert later.pk > max(relay.pk, dead.pk), "ids go on after the old rows"
    assert outbox.drain(seconds=10) == 2
    assert sorted(ran) == sorted([relay.pk, dead.pk])
    assert list(Effect.objects.values_list("kind", flat=True)) == ["session.turn_ended"]


def test_turn_end_rows_written_before_the_fact_had_subscribers_become_their_rows():
    """Before effects 0009 tickets took `session.turn_ended` rows and task runs their own
    `task.turn_ended`; after it each is the row of its subscriber, and runs."""
    before = [("effects", "0008_goals_connector_reply_kind")]
    old = migrate(before).loader.project_state(before[0]).apps.get_model("effects", "Effect")
    try:
        now = timezone.now()
        old.objects.create(kind="session.turn_ended", key="turn:5", due_at=now, payload={
            "session": 2, "turn": 5, "state": "completed", "error_code": ""})
        old.objects.create(kind="task.turn_ended", key="turn:6", due_at=now,
                           payload={"session": 3, "turn": 6})
    finally:
        migrate_to_latest()
    rows = {row.key: (row.kind, row.payload) for row in Effect.objects.all()}
    assert rows == {
        "tickets:turn:5": ("session.turn_ended", {
            "session": 2, "turn": 5, "state": "completed", "error_code": "",
            "fact": "session.turn_ended", "subscriber": "tickets"}),
        "tasks:turn:6": ("session.turn_ended", {
            "session": 3, "turn": 6, "fact": "session.turn_ended", "subscriber": "tasks"}),
    }
    assert outbox.drain(seconds=10) == 2  # no such session or turn: both no-ops, done
    assert not Effect.objects.exists()


def test_runs_and_a_version_waiting_before_the_outbox_carried_them_get_their_effects(
        django_user_model):
    """Before execution 0002 and policy 0004 a schedule run waited for a Celery message and
    a saved version for a beat sweep; after them each one still waiting has its effect."""
    from execution.models import Schedule, ScheduleRun
    from policy.models import PolicyHead

    owner = django_user_model.objects.create_user("scheduler")
    now = timezone.now()
    migrate([("execution", "0001_initial"), ("policy", "0003_applied_version")])
    try:
        schedule = Schedule.objects.create(owner=owner, name="nightly", every_seconds=60,
                                           mode="subtask", prompt="Sum up.", anchor=now)
        waiting = ScheduleRun.objects.create(schedule=schedule, slot=now)
        ScheduleRun.objects.create(schedule=schedule, slot=now + timedelta(minutes=1),
                                   started_at=now)
        ScheduleRun.objects.create(schedule=schedule, slot=now + timedelta(minutes=2),
                                   error_code="not_found")
        PolicyHead.objects.create(pk=1, version="v2", applied_version="v1")
    finally:
        migrate_to_latest()
    rows = sorted(Effect.objects.values_list("kind", "key", "payload"))
    assert rows == [("policy.apply", "version:v2", {}),
                    ("schedule.fire", f"run:{waiting.pk}", {"run_id": waiting.pk})]
