"""Refused webhooks, counted in Redis rather than written to the database one by one.

A forged or malformed webhook costs a Redis increment, not a database write (600 forged
requests used to be 600 row updates of the source's health). The counts are moved into the
source's health in one write per source by `flush` (run by the intake sweep every 30 s), and
`pending` lets a reader add what is not flushed yet, so the health shown is always whole.

A key names the source and its creation time — a source, not an id that a deleted source
may pass on — and a set lists the keys holding counts.
"""

from __future__ import annotations

import logging

import redis

from amux_common import metrics
from amux_common.shared_redis import client
from intake import source_actions

log = logging.getLogger(__name__)

PREFIX = "amux:intake:rejected:"
PENDING = PREFIX + "pending"


def key(source) -> str:
    return f"{PREFIX}{source.pk}:{int(source.created_at.timestamp() * 1_000_000)}"


def count(source, reason: str) -> None:
    """One refusal of ``source`` for ``reason``. Without Redis it is written at once."""
    metrics.delivery_refused(source.slug, reason)
    k = key(source)
    try:
        pipe = client().pipeline(transaction=True)
        pipe.hincrby(k, reason, 1)
        pipe.sadd(PENDING, k)
        pipe.execute()
    except redis.RedisError:
        source_actions.source_event_rejected(source_id=source.pk, reason=reason)


def pending(source) -> dict[str, int]:
    """Counts not flushed yet (empty when Redis cannot be read)."""
    try:
        raw = client().hgetall(key(source))
    except redis.RedisError:
        return {}
    return {r.decode(): int(n) for r, n in raw.items()}


def _take(k: bytes | str) -> dict[str, int]:
    pipe = client().pipeline(transaction=True)
    pipe.hgetall(k)
    pipe.delete(k)
    pipe.srem(PENDING, k)  # in the same step: a refusal after it adds the key again
    raw, _, _ = pipe.execute()
    return {r.decode(): int(n) for r, n in raw.items()}


def _give_back(k, counts: dict[str, int]) -> None:
    pipe = client().pipeline(transaction=True)
    for reason, n in counts.items():
        pipe.hincrby(k, reason, n)
    pipe.sadd(PENDING, k)
    pipe.execute()


def flush() -> int:
    """Move every pending count into its source's health; returns the refusals moved."""
    moved = 0
    for k in client().smembers(PENDING):
        name = k.decode()
        try:
            source_id, created = (int(part) for part in name[len(PREFIX):].split(":"))
        except ValueError:
            client().srem(PENDING, k)
            continue
        counts = _take(k)
        if not counts:
            continue
        try:
            kept = source_actions.source_rejections_counted(source_id=source_id, created_us=created,
                                                            counts=counts)
        except Exception:
            _give_back(k, counts)  # kept for the next flush; nothing is lost
            raise
        if kept:
            moved += sum(counts.values())
    return moved
