"""Why a ticket's run failed, and when a failed run is dispatched again (pure).

A ticket is never stranded: a failed run (the worker could not start, its settings are
missing, the provider failed, a watchdog stopped a turn) is dispatched again — a new run
under the same mandate — as soon as something that may fix it happens: a person adds
input, an operator presses Retry, or the agent settings change. An input that cannot be
delivered because no run can take it is marked "not delivered" with the failure's reason,
never retried for ever.

No Django, no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tickets.core.errors import CommandRefused, TicketEnded

SETTINGS_MISSING = "settings_missing"
DISPATCH_ERROR = "dispatch_error"
TURN_FAILED = "turn_failed"
WORKER_SETUP = "worker_setup"  # a file amux did not write in the worker's command directory
WORKSPACE = "workspace_error"  # the ticket's repository could not be cloned

# What the ticket page says after "Failed — ": the reason in a person's words.
REASONS = {
    SETTINGS_MISSING: "agent settings are not filled in",
    DISPATCH_ERROR: "the worker could not start",
    TURN_FAILED: "the worker's turn failed",
    WORKER_SETUP: "the worker's command directory holds a file amux did not write",
    WORKSPACE: "the ticket's repository could not be cloned",
    "unknown_runtime": "the worker runtime is not installed",
    "unknown_provider": "the worker provider does not exist",
    "provider_unsupported": "the runtime cannot use this provider",
    "provider_error": "the model provider answered with an error",
    "not_installed": "the worker runtime is not installed",
    "start_failed": "the worker runtime did not start",
    "runtime_exited": "the worker runtime exited",
    "host_error": "the session host failed",
    # the watchdogs (runtimes/watchdog.py)
    "repeat_tool_loop": "a watchdog stopped a loop of repeated tool calls",
    "turn_hard_cap": "a watchdog stopped a turn that ran too long",
    "turn_idle_timeout": "a watchdog stopped a turn that went silent",
    "tool_idle_timeout": "a watchdog stopped a tool that made no progress",
}


@dataclass(frozen=True)
class Failure:
    code: str
    message: str
    at: datetime | None = None

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message,
                "at": self.at.isoformat() if self.at else None}


def reason(code: str) -> str:
    """A failure code in a person's words (an unknown code is shown as it is)."""
    return REASONS.get(code, code.replace("_", " ") if code else "unknown reason")


def dispatch_failure(kind: str, message: str, code: str = "") -> Failure:
    """The failure of a dispatch that raised: `settings` (the agent settings cannot run a
    worker) or `session` (the session layer refused, with its own code)."""
    if kind == "settings":
        return Failure(SETTINGS_MISSING, message)
    if code in ("", "invalid", "conflict"):  # the session layer's generic codes say little
        code = DISPATCH_ERROR
    return Failure(code, message)


def turn_failure(error_code: str, message: str = "") -> Failure:
    """A worker turn ended failed (a provider error, a watchdog trip, a crash)."""
    code = error_code or TURN_FAILED
    return Failure(code, message or f"the worker's turn failed ({reason(code)})")


def last_failure(state: str | None, code: str, message: str, at: datetime | None,
                 legacy_reason: str = "") -> Failure | None:
    """The failure a ticket shows: its last run's, if that run failed. A run recorded
    before codes were kept shows its short end reason as both code and message."""
    if state != "failed":
        return None
    return Failure(code or legacy_reason or TURN_FAILED, message or legacy_reason, at)


class Cause(StrEnum):
    INPUT = "input"  # a person wrote (ticket input, a follow-up, an answer)
    RETRY = "retry"  # an operator pressed Retry
    SETTINGS = "settings"  # the agent settings changed


@dataclass(frozen=True)
class RunFacts:
    """What the rule needs about one ticket's runs."""

    ticket: int
    ended: bool
    live_assignment: int | None  # a run dispatching or running
    last_state: str | None  # the state of the newest run (None: never dispatched)
    attempts: int  # how many runs the ticket has had


class NotFailed(CommandRefused):
    code = "not_failed"


def redispatch(facts: RunFacts, cause: Cause) -> int | None:
    """The attempt number of a new run to dispatch now, or None when nothing is due.

    Retry is a command and says why it does nothing (refused); input and settings are
    facts, and a ticket that is not failed simply carries on."""
    if facts.ended:
        if cause is Cause.RETRY:
            raise TicketEnded(f"ticket {facts.ticket} has ended; nothing to retry")
        return None
    if facts.live_assignment is not None or facts.last_state != "failed":
        if cause is Cause.RETRY:
            raise NotFailed(f"ticket {facts.ticket} has not failed; nothing to retry")
        return None
    return facts.attempts + 1


class Delivery(StrEnum):
    POST = "post"  # the worker session exists (and has its run's brief): put the input in
    WAIT = "wait"  # a run is being dispatched or started: its brief comes first
    UNDELIVERABLE = "undeliverable"  # no run can take it: show it as not delivered


def delivery(*, has_session: bool, ended: bool, live_assignment: int | None,
             briefed: bool = True) -> Delivery:
    """What a `deliver` effect does with an input (a bounded wait only while a dispatch
    is in flight; a dispatch settles either way, and then the input is posted or shown as
    not delivered). ``briefed``: the live run's brief is in the session already — a run
    being started (its clone being made) gets its brief before any input."""
    if has_session and (briefed or live_assignment is None):
        return Delivery.POST
    if ended:
        return Delivery.UNDELIVERABLE
    if live_assignment is not None:
        return Delivery.WAIT
    return Delivery.UNDELIVERABLE


def undelivered_reason(failure: Failure | None, ended: bool) -> str:
    """Why an input could not reach the worker, for the ticket page."""
    if ended:
        return "the ticket has ended"
    if failure is None:
        return "no worker run is active for this ticket"
    return f"the worker run failed: {reason(failure.code)} — {failure.message}"
