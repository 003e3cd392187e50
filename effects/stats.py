"""How the outbox stands, per kind: what is due, running, waiting for a retry, dead, and how
old its oldest pending row is. Read by `amux doctor` (effects/doctor.py) and the admin's
effect list; one aggregate query."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min, Q
from django.utils import timezone

from effects.kinds import KINDS
from effects.models import Effect, EffectState


@dataclass(frozen=True)
class KindCounts:
    kind: str
    due: int  # pending, due now, no live lease: the next drain takes them
    running: int  # leased to a drainer now
    waiting: int  # pending, due later (backoff, Later, a delay)
    dead: int  # dead letters, waiting for an operator's retry
    oldest_seconds: float | None  # age of the oldest pending row

    @property
    def pending(self) -> int:
        return self.due + self.running + self.waiting

    def describe(self) -> str:
        parts = [f"{self.due} due", f"{self.running} running", f"{self.waiting} waiting",
                 f"{self.dead} dead letter{'' if self.dead == 1 else 's'}"]
        if self.oldest_seconds is not None:
            parts.append(f"oldest {age(self.oldest_seconds)}")
        return ", ".join(parts)


def age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def by_kind(now: datetime | None = None) -> list[KindCounts]:
    """Counts for every kind that has rows (known kinds first, in their order)."""
    now = now or timezone.now()
    pending = Q(state=EffectState.PENDING)
    leased = pending & Q(claimed_until__gt=now)
    free = pending & ~Q(claimed_until__gt=now)  # no lease, or an expired one
    rows = (
        Effect.objects.order_by()
        .values("kind")
        .annotate(
            due=Count("id", filter=free & Q(due_at__lte=now)),
            running=Count("id", filter=leased),
            waiting=Count("id", filter=free & Q(due_at__gt=now)),
            dead=Count("id", filter=Q(state=EffectState.DEAD)),
            oldest=Min("created_at", filter=pending),
        )
    )
    order = {kind: n for n, kind in enumerate(KINDS)}
    counts = [
        KindCounts(
            kind=row["kind"], due=row["due"], running=row["running"], waiting=row["waiting"],
            dead=row["dead"],
            oldest_seconds=(now - row["oldest"]).total_seconds() if row["oldest"] else None,
        )
        for row in rows
    ]
    return sorted(counts, key=lambda c: (order.get(c.kind, len(order)), c.kind))
