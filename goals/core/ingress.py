"""How one eligible event reaches its agent: exactly one effective mode per event.

The caller describes the event (addressed? which place?) and the agent's working session
as it found it under lock; ``decide`` answers one ``Decision``. Fallback is explicit and
fails closed by default; it never writes one event to two modes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# The session queue's bounds (documented in docs/goals.md, "Goals and agents (LoopX)").
QUEUE_MAX = 50            # queued items per session; one more is refused: queue_full
QUEUE_TTL = timedelta(hours=1)  # a queued item not delivered within this expires

EVENT_KINDS = ("message", "mention", "question", "reply")

# The working session as the caller found it: live, or why not.
LIVE = "live"
SESSION_FAILURES = ("no_session", "session_stale", "session_terminal", "session_foreign",
                    "session_ambiguous")


@dataclass(frozen=True)
class Decision:
    outcome: str          # delivered | queued | inboxed | ignored | refused
    mode: str             # the effective mode ("" when nothing was delivered)
    fallback_used: bool
    reason: str           # content-free; "" when delivered as configured


def _admit(capture_scope: str, addressed: bool, place_matches: bool) -> str | None:
    if not place_matches:
        return "topic_mismatch"
    if capture_scope == "mentions" and not addressed:
        return "not_addressed"
    return None


def decide(*, capture_scope: str, ingress_mode: str, fallback: str, addressed: bool,
           place_matches: bool, session: str, queue_length: int) -> Decision:
    rejected = _admit(capture_scope, addressed, place_matches)
    if rejected:
        return Decision("ignored", "", False, rejected)
    return _route(ingress_mode, session, queue_length, fallback_of=fallback, used=False,
                  reason="")


def _route(mode: str, session: str, queue_length: int, *, fallback_of: str, used: bool,
           reason: str) -> Decision:
    if mode == "async_inbox":
        return Decision("inboxed", mode, used, reason)
    if mode == "live_steering":
        if session == LIVE:
            return Decision("delivered", mode, used, reason)
        failure = session
    elif mode == "session_queue":
        if session != LIVE:
            failure = session
        elif queue_length >= QUEUE_MAX:
            failure = "queue_full"
        else:
            return Decision("queued", mode, used, reason)
    else:
        return Decision("refused", "", used, "unknown_mode")
    if not used and fallback_of not in ("", "none") and fallback_of != mode:
        return _route(fallback_of, session, queue_length, fallback_of="none", used=True,
                      reason=failure)
    return Decision("refused", "", used, failure)


def expired(queued_at: datetime, now: datetime) -> bool:
    return now - queued_at >= QUEUE_TTL
