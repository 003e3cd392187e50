"""The durable outbox: decide, store, then do (ARCHITECTURE.md "Effects").

Every side effect is first an `Effect` row written in the same transaction as the decision
that caused it, then executed by a drainer after commit (and by a periodic sweep, so a lost
wake-up only delays). One pending row per (kind, key): enqueueing the same key again
replaces the payload and makes it due now without changing its place in line. A handler
gets the effect's id as its idempotency key; it raises `Later` for "not now", any other
exception counts as a failed attempt (exponential backoff with jitter, then dead letter).
Relay and notice rows are ordered per channel: a row runs only when no earlier row of the
same channel is pending, so a failing head holds back the rows behind it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from tickets.models import Effect, EffectKind

log = logging.getLogger(__name__)


class Later(Exception):  # noqa: N818 - a signal, not an error
    """Not now (no free worker slot, a peer is busy): try again after `delay` seconds."""

    def __init__(self, delay: float = 5.0, reason: str = ""):
        super().__init__(reason or "later")
        self.delay = delay


class EffectError(ValueError):
    """Bad input to the outbox: an unknown kind or a payload that cannot be stored."""


@dataclass(frozen=True)
class KindPolicy:
    concurrency: int
    base_backoff: float
    max_backoff: float
    max_attempts: int
    lease_seconds: float
    ordered: bool = False


KINDS: dict[str, KindPolicy] = {
    EffectKind.DISPATCH: KindPolicy(4, 5, 600, 12, 900),
    EffectKind.DELIVER: KindPolicy(16, 2, 300, 15, 300),
    EffectKind.RELAY: KindPolicy(16, 2, 300, 15, 120, ordered=True),
    EffectKind.NOTICE: KindPolicy(16, 2, 300, 15, 120, ordered=True),
    EffectKind.ASSESS: KindPolicy(2, 10, 900, 8, 600),
    EffectKind.ACK: KindPolicy(16, 2, 300, 15, 120),
}
ORDERED_KINDS = [kind for kind, policy in KINDS.items() if policy.ordered]

Handler = Callable[[int, dict], None]
_handlers: dict[str, Handler] = {}


def register(kind: str) -> Callable[[Handler], Handler]:
    """Declare the handler of one effect kind; it must be idempotent per effect id."""
    _check_kind(kind)

    def decorate(fn: Handler) -> Handler:
        _handlers[kind] = fn
        return fn

    return decorate


def handlers() -> dict[str, Handler]:
    return dict(_handlers)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise EffectError(f"unknown effect kind {kind!r}; expected one of {sorted(KINDS)}")


def _check_payload(payload) -> dict:
    if not isinstance(payload, dict):
        raise EffectError(f"effect payload must be a JSON object, not {type(payload).__name__}")
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EffectError(f"effect payload is not JSON: {exc}") from exc
    return payload


def enqueue(kind: str, key: str, payload: dict, *, channel: str = "", delay: float = 0) -> Effect:
    """Store an effect in the caller's transaction; it runs after commit.

    The same (kind, key) while a row is pending replaces its payload and makes it due now
    (or after `delay`), keeping its place in line.
    """
    _check_kind(kind)
    payload = _check_payload(payload)
    if not key or len(key) > 300:
        raise EffectError("effect key must be 1 to 300 characters")
    if channel and not KINDS[kind].ordered:
        raise EffectError(f"only ordered kinds ({', '.join(ORDERED_KINDS)}) take a channel")
    due = timezone.now() + timedelta(seconds=delay)
    with transaction.atomic():
        effect = _replace(kind, key, payload, due)
        if effect is None:
            try:
                with transaction.atomic():
                    effect = Effect.objects.create(
                        kind=kind, key=key, payload=payload, channel=channel, due_at=due
                    )
            except IntegrityError:
                effect = _replace(kind, key, payload, due)
                if effect is None:  # pragma: no cover - the row vanished between the two
                    raise
        transaction.on_commit(kick)
    return effect


def _replace(kind: str, key: str, payload: dict, due) -> Effect | None:
    effect = (
        Effect.objects.select_for_update()
        .filter(kind=kind, key=key, state="pending")
        .first()
    )
    if effect is None:
        return None
    effect.payload = payload
    effect.version += 1
    effect.due_at = due
    effect.save(update_fields=["payload", "version", "due_at"])
    return effect


def kick() -> None:
    """Wake a drainer now. Losing this only delays: the beat sweep drains too."""
    from tickets.tasks import drain_outbox

    try:
        drain_outbox.apply_async(retry=False)
    except Exception:  # broker down: the sweep will find the rows
        log.warning("outbox kick not sent; the periodic sweep will drain", exc_info=True)


def retry_dead(ids: Iterable[int]) -> int:
    """Put dead letters back in line, due now (admin action)."""
    with transaction.atomic():
        count = Effect.objects.filter(pk__in=list(ids), state="dead").update(
            state="pending", attempts=0, due_at=timezone.now(), claimed_by="", claimed_until=None
        )
    if count:
        transaction.on_commit(kick)
    return count


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def backoff(policy: KindPolicy, attempts: int) -> float:
    delay = min(policy.max_backoff, policy.base_backoff * (2 ** max(0, attempts - 1)))
    return delay * random.uniform(0.5, 1.0)


def _lock_kind(kind: str) -> None:
    """Serialise claims of one kind across drainers so its concurrency limit is exact."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [0x616D75, kind])
    # SQLite: every write transaction is IMMEDIATE, already serialised.


def claim(owner: str, limit: int = 50) -> list[Effect]:
    """Claim up to `limit` due effects for `owner` (a lease per row), honouring each kind's
    free concurrency and per-channel order."""
    claimed: list[Effect] = []
    for kind, policy in KINDS.items():
        if len(claimed) >= limit:
            break
        with transaction.atomic():
            now = timezone.now()
            _lock_kind(kind)
            in_flight = Effect.objects.filter(
                kind=kind, state="pending", claimed_until__gt=now
            ).count()
            free = min(policy.concurrency - in_flight, limit - len(claimed))
            if free <= 0:
                continue
            due = Effect.objects.filter(kind=kind, state="pending", due_at__lte=now).filter(
                Q(claimed_until__isnull=True) | Q(claimed_until__lte=now)
            )
            if policy.ordered:
                earlier = Effect.objects.filter(
                    kind__in=ORDERED_KINDS,
                    state="pending",
                    channel=OuterRef("channel"),
                    id__lt=OuterRef("id"),
                )
                due = due.filter(Q(channel="") | ~Exists(earlier))
            ids = list(
                due.order_by("id")
                .select_for_update(skip_locked=True)
                .values_list("id", flat=True)[:free]
            )
            if not ids:
                continue
            until = now + timedelta(seconds=_lease_seconds(policy))
            Effect.objects.filter(id__in=ids).update(claimed_by=owner, claimed_until=until)
            claimed.extend(Effect.objects.filter(id__in=ids).order_by("id"))
    return claimed


def _lease_seconds(policy: KindPolicy) -> float:
    override = os.environ.get("AMUX_OUTBOX_LEASE_SECONDS")
    return float(override) if override else policy.lease_seconds


def run_one(effect: Effect, owner: str) -> str:
    """Run one claimed effect's handler and settle its row. Returns the outcome."""
    policy = KINDS[effect.kind]
    mine = Effect.objects.filter(pk=effect.pk, claimed_by=owner)
    handler = _handlers.get(effect.kind)
    try:
        if handler is None:
            raise EffectError(f"no handler registered for effect kind {effect.kind!r}")
        handler(effect.pk, effect.payload)
    except Later as later:
        mine.update(
            claimed_by="",
            claimed_until=None,
            due_at=timezone.now() + timedelta(seconds=later.delay),
        )
        return "later"
    except Exception as exc:
        attempts = effect.attempts + 1
        error = f"{type(exc).__name__}: {exc}"[:2000]
        if attempts >= policy.max_attempts:
            mine.update(state="dead", attempts=attempts, last_error=error,
                        claimed_by="", claimed_until=None)
            log.error("effect %s %s is a dead letter: %s", effect.kind, effect.pk, error)
            return "dead"
        mine.update(
            attempts=attempts,
            last_error=error,
            claimed_by="",
            claimed_until=None,
            due_at=timezone.now() + timedelta(seconds=backoff(policy, attempts)),
        )
        return "failed"
    deleted, _ = mine.filter(version=effect.version).delete()
    if not deleted:
        # Replaced while it ran: release it so the new payload runs too.
        mine.update(claimed_by="", claimed_until=None)
        return "replaced"
    return "done"


def drain(*, owner: str | None = None, batch: int = 50, seconds: float = 30.0) -> int:
    """Drain due effects until none is claimable or the time budget is spent."""
    owner = owner or worker_id()
    deadline = time.monotonic() + seconds
    done = 0
    while time.monotonic() < deadline:
        effects = claim(owner, batch)
        if not effects:
            break
        for effect in effects:
            if run_one(effect, owner) == "done":
                done += 1
    return done
