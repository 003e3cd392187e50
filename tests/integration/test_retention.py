"""Retention: beat prunes the timelines of long-ended tickets and old deliveries, in
bounded batches, and keeps everything newer, live or still in use."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from intake.models import Delivery
from sessions.models import TimelineEvent
from tests import factories as f
from tickets import retention, tasks
from tickets.actions import commands as ticket_commands
from tickets.models import Ticket

pytestmark = pytest.mark.django_db

NOW = timezone.now()
OLD = NOW - timedelta(days=120)
RECENT = NOW - timedelta(days=10)


@pytest.fixture
def source():
    return f.SourceFactory()


def _ticket(source, n: int, ended_at, events: int = 3, session=None) -> Ticket:
    trigger = f.TriggerFactory(source=source, thread__key=f"octo/app#{n}",
                               thread__title=f"t{n}", external_id=f"c{n}", text="")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title=f"Ticket {n}")
    if session is None:
        session = f.SessionFactory(lifecycle="archived")
        TimelineEvent.objects.bulk_create(
            TimelineEvent(session=session, seq=i, type="agent_message") for i in range(events))
    Ticket.objects.filter(pk=ticket.pk).update(session=session, ended_at=ended_at,
                                               end_reason="done" if ended_at else "")
    return Ticket.objects.get(pk=ticket.pk)


def _delivery(source, n: int, received_at, processed=True) -> Delivery:
    delivery = Delivery.objects.create(source=source, delivery_id=f"d{n}", body=b"{}")
    Delivery.objects.filter(pk=delivery.pk).update(
        received_at=received_at, processed_at=received_at if processed else None)
    return delivery


def test_prunes_old_ended_timelines_and_deliveries_and_keeps_the_rest(source, settings):
    settings.RETENTION_DAYS = 90
    old = _ticket(source, 1, OLD)
    recent = _ticket(source, 2, RECENT)
    live = _ticket(source, 3, None)
    # a session an old ticket shares with a live one stays whole
    shared = _ticket(source, 4, OLD, session=live.session)
    _delivery(source, 1, OLD)
    kept_unprocessed = _delivery(source, 2, OLD, processed=False)
    kept_recent = _delivery(source, 3, RECENT)

    assert tasks.prune_history() == 3 + 1
    assert not TimelineEvent.objects.filter(session=old.session).exists()
    assert TimelineEvent.objects.filter(session=recent.session).count() == 3
    assert TimelineEvent.objects.filter(session=live.session).count() == 3
    assert shared.session_id == live.session_id
    assert set(Delivery.objects.values_list("pk", flat=True)) == {kept_unprocessed.pk,
                                                                   kept_recent.pk}
    # the ended ticket stays as its archive, with its immutable mandate
    old.refresh_from_db()
    assert old.mandate and old.ended_at == OLD
    assert tasks.prune_history() == 0  # nothing left to do


def test_zero_days_keeps_everything(source, settings):
    settings.RETENTION_DAYS = 0
    _ticket(source, 1, OLD)
    _delivery(source, 1, OLD)
    assert retention.cutoff() is None
    assert tasks.prune_history() == 0
    assert TimelineEvent.objects.count() == 3 and Delivery.objects.count() == 1


def test_a_run_deletes_in_bounded_batches_and_the_next_run_continues(source, settings,
                                                                      monkeypatch):
    settings.RETENTION_DAYS = 30
    monkeypatch.setattr(retention, "BATCH", 4)
    monkeypatch.setattr(retention, "MAX_BATCHES", 2)
    _ticket(source, 1, OLD, events=11)
    first = retention.prune()
    assert first.events == 8  # two batches of four, then the run stops
    assert TimelineEvent.objects.count() == 3
    assert retention.prune().events == 3
    assert TimelineEvent.objects.count() == 0


def test_the_prune_task_is_on_beats_schedule():
    from amux_site.celery import app

    entry = app.conf.beat_schedule["history-prune"]
    assert entry["task"] == "tickets.prune_history" and entry["schedule"] <= 3600


def test_retention_days_come_from_the_environment():
    import os
    import subprocess
    import sys

    from django.conf import settings as django_settings

    code = "from django.conf import settings; print(settings.RETENTION_DAYS)"
    base = {**os.environ, "AMUX_EMBEDDED_REDIS": "attach",
            "DJANGO_SETTINGS_MODULE": "amux_site.settings"}
    base.pop("AMUX_RETENTION_DAYS", None)

    def read(**env):
        return subprocess.run([sys.executable, "-c", code], env={**base, **env},
                              capture_output=True, text=True, timeout=60,
                              cwd=django_settings.BASE_DIR)

    assert read().stdout.strip() == "90"
    assert read(AMUX_RETENTION_DAYS="0").stdout.strip() == "0"
    refused = read(AMUX_RETENTION_DAYS="soon")
    assert refused.returncode != 0 and "AMUX_RETENTION_DAYS must be a whole number" in (
        refused.stderr)
