"""A session's lifecycle: the one table of what each event makes of it.

- the runtime started (the host has it up): created, sleeping or running → idle
- a turn started: → running; a turn ended (its one terminal stored): → idle
- retired (idle timeout, a manual sleep, a start that failed): → sleeping, with why
- archive: → archived, which nothing leaves (a late terminal, a start that raced it)

The writers (sessions/actions.py, and the timeline's turn start and end) ask ``after``
under the session's lock and store what it answers; none of them sets a lifecycle of its
own. Whether a command may change it now (``refusal``) and whether a host may retire its
runtime (``may_retire``) are decided here too.
"""

from __future__ import annotations

from dataclasses import dataclass

CREATED, RUNNING, IDLE, SLEEPING, ARCHIVED = "created", "running", "idle", "sleeping", "archived"
STATES = (CREATED, RUNNING, IDLE, SLEEPING, ARCHIVED)

RUNTIME_STARTED = "runtime_started"  # the host has the runtime up
TURN_STARTED = "turn_started"
TURN_ENDED = "turn_ended"            # its one terminal event was stored
RETIRED = "retired"                  # the runtime let go: idle timeout, sleep, failed start
ARCHIVE = "archive"
EVENTS = (RUNTIME_STARTED, TURN_STARTED, TURN_ENDED, RETIRED, ARCHIVE)

_LIVE = (CREATED, RUNNING, IDLE, SLEEPING)
TABLE: dict[tuple[str, str], str] = {
    **{(state, RUNTIME_STARTED): IDLE for state in _LIVE},
    **{(state, TURN_STARTED): RUNNING for state in _LIVE},
    **{(state, TURN_ENDED): IDLE for state in _LIVE},
    **{(state, RETIRED): SLEEPING for state in _LIVE},
    **{(state, ARCHIVE): ARCHIVED for state in STATES},
    # an archived session takes nothing up again (a late terminal, a start that raced it)
    **{(ARCHIVED, event): ARCHIVED for event in EVENTS},
}


@dataclass(frozen=True, slots=True)
class Change:
    lifecycle: str
    sleep_reason: str | None  # None: the stored reason stays


def after(current: str, event: str, reason: str = "") -> Change:
    """What ``event`` makes of a session in ``current``. Retiring stores why (``reason``);
    a runtime or turn starting clears the last sleep's reason."""
    new = TABLE[(current, event)]
    if new == SLEEPING and current != ARCHIVED:
        return Change(SLEEPING, reason)
    if new != ARCHIVED and event in (RUNTIME_STARTED, TURN_STARTED):
        return Change(new, "")
    return Change(new, None)


def apply(row, event: str, reason: str = "") -> None:
    """``after`` written onto a session row's ``lifecycle`` and ``sleep_reason``."""
    change = after(row.lifecycle, event, reason)
    row.lifecycle = change.lifecycle
    if change.sleep_reason is not None:
        row.sleep_reason = change.sleep_reason


# the commands a person (API, panel) gives a session's lifecycle
SLEEP, ARCHIVE_COMMAND = "sleep", "archive"
ALREADY = "already"  # an archive of an archived session: nothing to do, not an error


def refusal(current: str, command: str, *, work_in_flight: bool) -> str | None:
    """Why ``command`` may not change a session in ``current`` now (a refusal code: 409),
    ``ALREADY`` when it is done already, or None: it may. Work in flight (a turn running or
    inputs queued) is served first: a sleep or an archive never drops it."""
    if command not in (SLEEP, ARCHIVE_COMMAND):
        raise ValueError(f"unknown lifecycle command {command!r}")
    if current == ARCHIVED:
        return "session_archived" if command == SLEEP else ALREADY
    return "busy" if work_in_flight else None


def may_retire(*, holds_lease: bool, work_waiting: bool) -> bool | None:
    """A host's retirement of its runtime (idle timeout, a sleep it was asked for): True,
    it retires; False, work arrived meanwhile (it serves that first); None, it no longer
    holds the lease (another host owns the session: nothing of it is written)."""
    if not holds_lease:
        return None
    return not work_waiting
