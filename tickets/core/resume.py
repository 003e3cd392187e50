"""Revalidation before a ticket resumes (seed 002, 恢复前校验). Pure: no Django, no I/O,
no clock.

A ticket resumes under the mandate it was given — a revival, an operator's Retry, a
person's message on a failed ticket, new agent settings, a policy change that wakes its
worker — only while that mandate's source still stands: it exists, it is enabled, and it
still listens to the ticket's thread (its plugin's `scope()` of the stored trigger meta is
not None). Whether it still receives *every* message there does not matter: listening
decides resuming, receiving all decides new candidates.

A ticket that may not resume ends, its end reason naming why, and the person who asked is
told once on its thread; a source that no longer exists reaches nobody.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

SOURCE_MISSING = "source_missing"
SOURCE_DISABLED = "source_disabled"
NOT_LISTENING = "not_listening"
NOT_RESUMABLE = "not_resumable"  # end reason: f"{NOT_RESUMABLE}:<why>"

# Why, in an operator's words (the ticket's label).
WHY = {
    SOURCE_MISSING: "its source no longer exists",
    SOURCE_DISABLED: "its source has been disabled",
    NOT_LISTENING: "amux no longer listens to this thread",
}
# Why, in the asker's words (they know the thread, not amux's sources).
TOLD = {
    SOURCE_DISABLED: "amux has been switched off here",
    NOT_LISTENING: "amux no longer follows this thread",
}


@dataclass(frozen=True)
class SourceStanding:
    """What revalidation needs about the source of a ticket's mandate."""

    exists: bool
    enabled: bool = False
    listens: bool = False  # the source's scope() of the stored trigger meta is not None


def refusal(source: SourceStanding) -> str | None:
    """Why the ticket may not resume, or None when it may."""
    if not source.exists:
        return SOURCE_MISSING
    if not source.enabled:
        return SOURCE_DISABLED
    if not source.listens:
        return NOT_LISTENING
    return None


def end_reason(why: str) -> str:
    return f"{NOT_RESUMABLE}:{why}"


def refused_why(reason: str) -> str | None:
    """The refusal an end reason names, or None for any other end."""
    prefix, _, why = (reason or "").partition(":")
    return why if prefix == NOT_RESUMABLE and why in WHY else None


def tell_key(runs: int) -> str:
    """One message per refusal of a resume: a resume refused again before any new run
    (a Retry, a second follow-up) is the same refusal and tells nobody twice."""
    return f"not-resumable:{runs}"


@dataclass(frozen=True)
class Resumption:
    """The outcome of revalidation: the ticket's field changes and, when refused, what
    the asker is told (None: nobody is told)."""

    refused: str | None = None
    changes: dict = field(default_factory=dict)
    tell: str | None = None

    @property
    def ok(self) -> bool:
        return self.refused is None


def revalidate(source: SourceStanding, *, ended: bool, end_reason_now: str,
               told: bool, now: datetime) -> Resumption:
    """May a run resume the ticket now? Refused: the ticket ends (one that had ended
    already keeps its end time) with the reason, and the asker is told once, through a
    source that still exists."""
    why = refusal(source)
    if why is None:
        return Resumption()
    changes = {} if ended else {"ended_at": now}
    if end_reason_now != end_reason(why):
        changes["end_reason"] = end_reason(why)
    tell = None
    if source.exists and not told:
        tell = (f"amux: the work asked for here has stopped and cannot resume — {TOLD[why]}. "
                "Ask again where amux is listening.")
    return Resumption(why, changes, tell)
