"""How many sessions can be awake at once, and which sessions wait for room.

A runtime worker runs Celery's thread pool: each of its slots is one thread that runs one
awake session's host (sessions/host.py), so its concurrency is the number of sessions it
keeps awake; the default is sized by memory (settings.AMUX_SESSION_CAPACITY). A sleeping
session holds no slot and no process. When every slot is held, a woken session's host task
waits in the broker and starts the moment a slot frees; meanwhile the session — and the
ticket it works for — says "waiting for capacity" (derived here, never stored).

Workers publish their slots with their heartbeat (amux_common/worker_registry.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis
from django.db.models import Count, Q
from django.utils import timezone

from amux_common import worker_registry
from amux_common.shared_redis import client
from sessions.models import Lifecycle, Session, TurnState

WAKE_KEY = "amux:session:{id}:wake"
# A host task sent and not yet started: the sweep (every 10 s) sends no second one
# meanwhile. Past this it may have been lost with a worker that had reserved it, and the
# sweep sends it again; a full machine so gathers at most one spare task per session per
# WAKE_TTL (each ends at once: the lease is held, or there is nothing to do). A task pinned
# to a host is sent again at every sweep: that host may have died since its heartbeat.
WAKE_TTL = 30
PINNED_WAKE_TTL = 9
# A worker writes its heartbeat every 5 s: one silent for longer than this is not trusted
# with a session pinned to it.
FRESH_HEARTBEAT = 12.0


@dataclass(frozen=True)
class Room:
    slots: int  # runtime worker slots alive now
    awake: int  # sessions whose host holds a live lease

    @property
    def full(self) -> bool:
        return self.slots > 0 and self.awake >= self.slots

    @property
    def free(self) -> int:
        return max(0, self.slots - self.awake)


def _runtime_workers() -> list[dict]:
    try:
        return [w for w in worker_registry.workers(client())
                if any(q == "runtime" or q.startswith("runtime.") for q in w.get("queues", ()))]
    except redis.RedisError:
        return []


def host_alive(host: str) -> bool:
    """A worker consuming ``runtime.<host>`` wrote its heartbeat within FRESH_HEARTBEAT."""
    queue = f"runtime.{host}"
    now = time.time()
    return any(queue in w.get("queues", ()) and now - float(w.get("at") or 0) < FRESH_HEARTBEAT
               for w in _runtime_workers())


def _live_lease() -> Q:
    return ~Q(lease_owner="") & Q(lease_expires_at__gt=timezone.now())


def room() -> Room:
    slots = sum(int(w.get("slots") or 0) for w in _runtime_workers())
    return Room(slots=slots, awake=Session.objects.filter(_live_lease()).count())


def waiting_for_capacity(session_ids: Iterable[int]) -> set[int]:
    """The sessions among ``session_ids`` that have input waiting and no host because every
    runtime slot is held by another awake session."""
    ids = [i for i in session_ids if i is not None]
    if not ids:
        return set()
    wanting = set(_wanting().filter(pk__in=ids).values_list("pk", flat=True))
    if not wanting or not room().full:
        return set()
    return wanting


def waiting_by_runtime() -> dict[str, int]:
    """How many sessions of each runtime wait for capacity now (as above, for metrics)."""
    if not room().full:
        return {}
    return dict(Session.objects.filter(pk__in=_wanting().values("pk")).values_list("runtime")
                .annotate(n=Count("pk")).order_by())


def _wanting():
    """Sessions with input waiting and no host."""
    return (Session.objects.filter(turns__state=TurnState.QUEUED)
            .exclude(lifecycle=Lifecycle.ARCHIVED).exclude(_live_lease()))


def mark_wake(session_id: int, *, ttl: int = WAKE_TTL, replace: bool = False) -> bool:
    """Record that a host task is on its way; False if one already was (``replace``: record
    it anyway, for a wake that sends its task whatever the sweep did)."""
    try:
        return bool(client().set(WAKE_KEY.format(id=session_id), "1", nx=not replace,
                                 ex=ttl))
    except redis.RedisError:
        return True  # better a duplicate host task (it finds the lease held) than none


def wake_taken(session_id: int) -> None:
    """The host took the session: the next wake sends a new task."""
    with contextlib.suppress(redis.RedisError):
        client().delete(WAKE_KEY.format(id=session_id))
