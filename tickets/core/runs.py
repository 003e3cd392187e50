"""What an executor's facts change on its run (an assignment): start, end, end of a turn.
Pure: the action loads and locks the run, passes `now`, and saves the changes answered."""

from __future__ import annotations

from datetime import datetime

from tickets.core import failure as failures

SETTLED = ("ended", "failed")


def started(state: str, started_at: datetime | None, now: datetime) -> dict | None:
    """A run reported started; a run stopped meanwhile keeps its end (None: no change)."""
    if state in SETTLED:
        return None
    return {"state": "running", "started_at": started_at or now}


def ended(state: str, *, reason: str, failed: bool, failure: failures.Failure | None,
          now: datetime) -> dict | None:
    """A run ended; a failed one keeps its failure whole (code and message). A run that
    settled already is not settled again (None)."""
    if state in SETTLED:
        return None
    if failed and failure is None:
        failure = failures.Failure(failures.DISPATCH_ERROR, reason)
    return {
        "state": "failed" if failed else "ended",
        "ended_at": now,
        "end_reason": ((failure.code if failure else "") or reason)[:60],
        "failure_code": failure.code[:60] if failure else "",
        "failure_message": failure.message if failure else "",
    }


def turn_ended(state: str, *, error_code: str, error_message: str,
               ended_at: datetime) -> dict:
    """The worker's session ended a turn at `ended_at` (the fact may arrive later, after a
    crash: a person who spoke in between spoke after the worker's last word). A failed turn
    fails the run, with the turn's own words."""
    changes: dict = {"last_turn_at": ended_at}
    if state == "failed":
        failure = failures.turn_failure(error_code, error_message)
        changes.update(state="failed", ended_at=ended_at, end_reason=failure.code[:60],
                       failure_code=failure.code[:60], failure_message=failure.message)
    return changes
