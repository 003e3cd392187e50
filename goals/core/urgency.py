"""operator_inbox_urgency_v0: what an agent's inbox projects — counts, oldest age and
reply_due, never bodies, authors, ids or chat ids."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

# Only typed questions and mentions ask for an answer; ordinary messages and replies to
# the bot are counted but do not make a reply due.
ASKS_FOR_REPLY = ("question", "mention")


def project(pending: Iterable[tuple[str, datetime]], now: datetime) -> dict:
    """``pending``: (kind, received at) of each undrained event."""
    items = list(pending)
    kinds = [k for k, _ in items]
    oldest = min((at for _, at in items), default=None)
    return {
        "pending": len(items),
        "questions": kinds.count("question"),
        "mentions": kinds.count("mention"),
        "replies": kinds.count("reply"),
        "oldest_age_s": int((now - oldest).total_seconds()) if oldest else None,
        "reply_due": any(k in ASKS_FOR_REPLY for k in kinds),
    }
