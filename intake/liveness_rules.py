"""Whether a source is listening, derived from facts — never a stored word. Pure.

- `disconnected`: the source is disabled, or the provider said so (Lark refused the app's
  credentials on its bot info; GitHub deleted or suspended the installation).
- A source received by a long connection (a receiver process of its own) is `listening`
  while that process beats its heartbeat, or delivers an event, at least every
  `receiver_timeout` seconds and its connection is up; a quiet chat does not make it
  stale, since the live connection is itself the evidence that nothing was missed.
  `stale` when the beats stop (`receiver_down`) or it beats without a connection
  (`receiver_not_connected`).
- A webhook source has no process of its own to ask: an event arriving is the only sign
  that the provider still sends. It is `listening` while an event arrived within its
  expected interval, `stale` (`no_events_within_interval`) after; an interval of 0 means
  the source is never judged by quietness.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

LISTENING, STALE, DISCONNECTED = "listening", "stale", "disconnected"


@dataclass(frozen=True)
class Liveness:
    state: str
    reason: str = ""
    since: datetime | None = None


@dataclass(frozen=True)
class Beat:
    """The last heartbeat of a long-connection receiver: when, whether its connection was
    up then, and since when it has been in that condition."""

    at: datetime
    connected: bool
    since: datetime | None = None


def source_state(*, enabled: bool, long_connection: bool, beat: Beat | None,
                 last_event_at: datetime | None, provider: dict | None,
                 expected_interval: int, receiver_timeout: float, created_at: datetime,
                 now: datetime) -> Liveness:
    if not enabled:
        return Liveness(DISCONNECTED, "source_disabled")
    provider = provider or {}
    if provider.get("state") == DISCONNECTED:
        return Liveness(DISCONNECTED, provider.get("reason") or "provider_disconnected",
                        _when(provider.get("at")))
    if long_connection:
        timeout = timedelta(seconds=receiver_timeout)
        signs = [t for t in (beat.at if beat else None, last_event_at) if t is not None]
        alive = max(signs) if signs else None
        if alive is None or now - alive > timeout:
            return Liveness(STALE, "receiver_down", (alive or created_at) + timeout)
        if beat is not None and not beat.connected and beat.at >= alive:
            return Liveness(STALE, "receiver_not_connected", beat.since or beat.at)
        return Liveness(LISTENING, "", (beat.since if beat else None) or alive)
    if expected_interval > 0:
        interval = timedelta(seconds=expected_interval)
        if now - (last_event_at or created_at) > interval:
            return Liveness(STALE, "no_events_within_interval",
                            (last_event_at or created_at) + interval)
    return Liveness(LISTENING, "", last_event_at or created_at)


def _when(value) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
