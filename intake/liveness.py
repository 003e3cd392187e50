"""A source's liveness, read from its facts (rules: intake/liveness_rules.py): the
long-connection receiver's heartbeat in Redis, the last event stored, and what the
provider said (kept in the source's health by intake/source_actions.py).

The heartbeat is Redis's, not the database's: it is written every few seconds by each
receiver and only ever read as "how long ago", so losing it (a Redis restart) reads as a
receiver that has not beaten yet, which the next beat repairs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.conf import settings

from amux_common import shared_redis
from amux_common.clock import now as clock
from intake.liveness_rules import Beat, Liveness, source_state
from intake.models import Delivery, Source
from intake.sources import KINDS

BEAT_KEY = "amux:lark-receiver:beat:{source_id}"
BEAT_KEPT = 86400  # a beat older than this tells nothing more than none


def beat_every() -> float:
    """Seconds between a receiver's heartbeats (`AMUX_RECEIVER_BEAT_SECONDS`, 15)."""
    return settings.AMUX_RECEIVER_BEAT_SECONDS


def receiver_timeout() -> float:
    """Seconds without a heartbeat (or an event) after which a long-connection source is
    stale (`AMUX_RECEIVER_TIMEOUT_SECONDS`, four beats)."""
    return settings.AMUX_RECEIVER_TIMEOUT_SECONDS


def beat(source_id: int, *, connected: bool, since: datetime) -> None:
    """The receiver of `source_id` is alive now; `connected`: its long connection is up
    (since `since`)."""
    value = json.dumps({"at": clock().timestamp(), "connected": connected,
                        "since": since.timestamp()})
    shared_redis.client().set(BEAT_KEY.format(source_id=source_id), value, ex=BEAT_KEPT)


def last_beat(source_id: int) -> Beat | None:
    raw = shared_redis.client().get(BEAT_KEY.format(source_id=source_id))
    try:
        value = json.loads(raw) if raw else None
        return Beat(datetime.fromtimestamp(float(value["at"]), UTC), bool(value["connected"]),
                    datetime.fromtimestamp(float(value["since"]), UTC))
    except (TypeError, ValueError, KeyError):
        return None


def expected_interval(source: Source) -> int:
    """Seconds a webhook source may stay quiet before it shows stale: the source's own
    `expected_interval`, else its kind's default (0: never judged by quietness)."""
    own = (source.config or {}).get("expected_interval")
    if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
        return own
    kind = KINDS.get(source.kind)
    return int(getattr(kind, "expected_interval", 0) or 0)


def is_long_connection(source: Source) -> bool:
    return source.kind == "lark" and (source.config or {}).get("receiver") == "long_connection"


def of(source: Source, *, last_event_at: datetime | None = None,
       now: datetime | None = None) -> Liveness:
    """The source's liveness now (`last_event_at` when the caller read it already)."""
    if last_event_at is None:
        last_event_at = Delivery.objects.filter(source=source).order_by("-pk").values_list(
            "received_at", flat=True).first()
    long_connection = is_long_connection(source)
    return source_state(
        enabled=source.enabled, long_connection=long_connection,
        beat=last_beat(source.pk) if long_connection else None,
        last_event_at=last_event_at, provider=(source.health or {}).get("provider"),
        expected_interval=expected_interval(source), receiver_timeout=receiver_timeout(),
        created_at=source.created_at, now=now or clock())


def shown(live: Liveness) -> dict:
    return {"state": live.state, "reason": live.reason or None,
            "since": live.since.isoformat() if live.since else None}
