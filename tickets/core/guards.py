"""Guards: a spend cap per ticket and per day (tokens) and a cap on the messages a ticket
sends per hour. Pure: the usage facts and the clock are passed in.

Windows are fixed and in UTC: a day runs from 00:00 to 24:00 UTC, an hour from :00 to :00.
A cap of 0 means no cap. Reaching a cap blocks the ticket (stage `blocked`, the cap named in
the label) until the window rolls over, an operator raises the cap, or presses Retry — a
Retry waives what was spent so far against the cap that blocked, so the ticket gets one
more cap's worth of it (the waiver below is the baseline it counts from).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

TICKET_TOKENS = "ticket_tokens"
DAILY_TOKENS = "daily_tokens"
HOURLY_MESSAGES = "hourly_messages"


@dataclass(frozen=True)
class Caps:
    ticket_tokens: int = 0
    daily_tokens: int = 0
    messages_per_hour: int = 0


@dataclass(frozen=True)
class Waiver:
    """What an operator waived by pressing Retry on a blocked ticket: only the cap that
    blocked it counts from there (the ticket's tokens from `ticket_tokens`, the day's from
    `day_tokens` within `day`, messages released after `messages_at` within its hour)."""

    ticket_tokens: int = 0
    day: date | None = None
    day_tokens: int = 0
    messages_at: datetime | None = None

    def as_dict(self) -> dict:
        return {"ticket_tokens": self.ticket_tokens,
                "day": self.day.isoformat() if self.day else None,
                "day_tokens": self.day_tokens,
                "messages_at": self.messages_at.isoformat() if self.messages_at else None}

    @classmethod
    def from_dict(cls, data: dict | None) -> Waiver:
        data = data or {}
        day, at = data.get("day"), data.get("messages_at")
        return cls(ticket_tokens=int(data.get("ticket_tokens") or 0),
                   day=date.fromisoformat(day) if day else None,
                   day_tokens=int(data.get("day_tokens") or 0),
                   messages_at=datetime.fromisoformat(at) if at else None)


def waive(found: Reached, spend: Spend, now: datetime, before: Waiver) -> Waiver:
    """Retry on a ticket `found` blocks: that cap counts from what was spent now."""
    if found.cap == TICKET_TOKENS:
        return replace(before, ticket_tokens=spend.ticket_tokens)
    if found.cap == DAILY_TOKENS:
        return replace(before, day=day_start(now).date(), day_tokens=spend.day_tokens)
    return replace(before, messages_at=now)


@dataclass(frozen=True)
class Spend:
    ticket_tokens: int = 0  # the worker session's cumulative tokens
    day_tokens: int = 0  # every session's tokens within today (UTC)
    sent_this_hour: int = 0  # this ticket's messages released within this hour
    held: int = 0  # this ticket's messages kept back by the cap


@dataclass(frozen=True)
class Reached:
    cap: str
    limit: int
    until: datetime | None  # when it resets by itself
    held: int = 0

    @property
    def text(self) -> str:
        """The reason in a person's words (the ticket's label: "Blocked — <text>")."""
        if self.cap == TICKET_TOKENS:
            return f"the ticket's token cap ({self.limit:,}) is reached"
        if self.cap == DAILY_TOKENS:
            return f"the daily token cap ({self.limit:,}) is reached"
        held = f"; {self.held} message{'s' if self.held != 1 else ''} held" if self.held else ""
        return f"the hourly message cap ({self.limit:,}) is reached{held}"


def day_start(now: datetime) -> datetime:
    now = now.astimezone(UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def hour_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def tokens_reached(caps: Caps, spend: Spend, now: datetime,
                   waiver: Waiver = Waiver()) -> Reached | None:
    """The token cap this ticket has reached, if any (the ticket's own cap first)."""
    ticket_used = spend.ticket_tokens - waiver.ticket_tokens
    if caps.ticket_tokens and ticket_used >= caps.ticket_tokens:
        return Reached(TICKET_TOKENS, caps.ticket_tokens, None)
    today = day_start(now)
    day_used = spend.day_tokens - (waiver.day_tokens if waiver.day == today.date() else 0)
    if caps.daily_tokens and day_used >= caps.daily_tokens:
        return Reached(DAILY_TOKENS, caps.daily_tokens, today + timedelta(days=1))
    return None


def may_send(caps: Caps, spend: Spend) -> bool:
    """Whether one more message goes out now; never ahead of one already held (order)."""
    if not caps.messages_per_hour:
        return True
    return spend.held == 0 and spend.sent_this_hour < caps.messages_per_hour


def releasable(caps: Caps, spend: Spend) -> int:
    """How many held messages go out now, oldest first (the hour rolled over or the cap
    was raised)."""
    if not caps.messages_per_hour:
        return spend.held
    return max(0, min(spend.held, caps.messages_per_hour - spend.sent_this_hour))


def reached(caps: Caps, spend: Spend, now: datetime,
            waiver: Waiver = Waiver()) -> Reached | None:
    """The first cap that blocks the ticket now, or None. The message cap blocks only once a
    message was actually held back."""
    tokens = tokens_reached(caps, spend, now, waiver)
    if tokens is not None:
        return tokens
    if spend.held and releasable(caps, spend) < spend.held:
        return Reached(HOURLY_MESSAGES, caps.messages_per_hour,
                       hour_start(now) + timedelta(hours=1), held=spend.held)
    return None


def retry_in(found: Reached, now: datetime, longest: float = 300.0) -> float:
    """Seconds until a held delivery or dispatch looks again (the reset, at most `longest`;
    raising a cap or Retry releases at once anyway)."""
    if found.until is None:
        return longest
    return max(1.0, min(longest, (found.until - now).total_seconds()))
