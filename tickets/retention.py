"""Retention: history older than settings.RETENTION_DAYS is pruned by beat.

What goes is what grows without bound and is never read again for work in progress:
- the timelines (sessions' events) of tickets that ended before the cutoff, when no other
  ticket still uses that session; the ticket itself stays as its archive — its mandate is
  immutable by design (the database refuses to delete it), and its inputs, reports and
  questions are the short audit record of what was asked and done;
- deliveries (raw webhook payloads) processed before the cutoff. A delivery id older than
  that is no longer recognised as a duplicate, which only a manual redelivery of a months
  old event could meet.

Each step deletes at most BATCH rows in its own short transaction (SQLite has one writer),
and a run stops after MAX_BATCHES per kind; the next run continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from intake.models import Delivery
from sessions import timeline
from sessions.models import Lifecycle, Session
from tickets.models import Ticket

BATCH = 500
MAX_BATCHES = 20


@dataclass
class Pruned:
    events: int = 0
    deliveries: int = 0

    @property
    def total(self) -> int:
        return self.events + self.deliveries


def cutoff(days: int | None = None, now: datetime | None = None) -> datetime | None:
    """The moment before which history goes; None while retention is off (0 days)."""
    days = settings.RETENTION_DAYS if days is None else days
    if not days:
        return None
    return (now or timezone.now()) - timedelta(days=days)


def _expired_sessions(before: datetime):
    """Sessions whose every ticket ended before `before` (and that are not working)."""
    newer = Ticket.objects.filter(session=OuterRef("pk")).exclude(ended_at__lt=before)
    return (Session.objects.filter(tickets__ended_at__lt=before)
            .exclude(lifecycle=Lifecycle.RUNNING)
            .exclude(Exists(newer)).values("pk"))


def _in_batches(delete_batch: Callable[[int], int]) -> int:
    """Rows deleted BATCH at a time by ``delete_batch`` (which says how many went), until
    fewer remain or MAX_BATCHES ran."""
    removed = 0
    for _ in range(MAX_BATCHES):
        went = delete_batch(BATCH)
        removed += went
        if went < BATCH:
            break
    return removed


def _forget_deliveries(deliveries, limit: int) -> int:
    with transaction.atomic():
        ids = list(deliveries.values_list("pk", flat=True)[:limit])
        return Delivery.objects.filter(pk__in=ids).delete()[0] if ids else 0


def prune(days: int | None = None, now: datetime | None = None) -> Pruned:
    before = cutoff(days, now)
    if before is None:
        return Pruned()
    expired = _expired_sessions(before)
    deliveries = Delivery.objects.filter(received_at__lt=before, processed_at__lt=before)
    # a session's events go through its timeline, their one writer
    return Pruned(events=_in_batches(lambda limit: timeline.forget(expired, limit)),
                  deliveries=_in_batches(lambda limit: _forget_deliveries(deliveries, limit)))
