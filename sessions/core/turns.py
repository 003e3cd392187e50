"""A turn's state: the one table of what each event makes of it, and what a lost host
does to a turn it left running.

- its host opened it (``turn.started``): queued → running; a second start opens nothing
- its terminal (``turn.completed``, ``turn.failed``, ``turn.cancelled``): queued or running
  → that end (a queued turn ends when the runtime could not start); an ended turn takes no
  second one: a later terminal is late, kept only as provenance on the accepted one
- an interrupt asked for is kept on a running turn (``interrupt_requested`` in its input),
  so a host that dies before it lands does not continue the turn
- the host was lost (``host_lost``): the turn ends cancelled and its input is queued again
  as a continuation, at most ``RESUME_LIMIT`` times; an interrupted turn is not continued,
  a goal turn is not replayed (the next host admits the goal's next continuation afresh),
  nor is a turn of an archived session; past the bound the turn ends failed

The writer (sessions/timeline.py) applies ``change`` as a conditional UPDATE under the
session's lock, so the state it guards on is the row's own at that moment.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from runtimes import events as rt

QUEUED, RUNNING = "queued", "running"
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
STATES = (QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED)
ENDED = frozenset((COMPLETED, FAILED, CANCELLED))

START = rt.TurnStarted.type
# the runtime's terminal events and the state each ends a turn in
TERMINALS = {rt.TurnCompleted.type: COMPLETED, rt.TurnFailed.type: FAILED,
             rt.TurnCancelled.type: CANCELLED}
EVENTS = (START, *TERMINALS)

TABLE: dict[tuple[str, str], str] = {
    (QUEUED, START): RUNNING,
    **{(state, terminal): end for state in (QUEUED, RUNNING)
       for terminal, end in TERMINALS.items()},
}


def after(current: str, event: str) -> str | None:
    """What ``event`` makes of a turn in ``current``; None: it changes nothing (a second
    start, a late terminal)."""
    if event not in EVENTS:
        raise ValueError(f"unknown turn event {event!r}")
    return TABLE.get((current, event))


@dataclass(frozen=True, slots=True)
class Change:
    """``event`` as one conditional write: the turn takes ``state`` if its row is in one
    of ``sources`` (the writer's guard), else it is left as it is."""

    sources: tuple[str, ...]
    state: str


@functools.cache  # on every turn's start and end
def change(event: str) -> Change:
    """The table's row for ``event``, as the writer applies it."""
    targets = {new for (_, e), new in TABLE.items() if e == event}
    if len(targets) != 1:
        raise ValueError(f"unknown turn event {event!r}")
    return Change(tuple(s for s in STATES if (s, event) in TABLE), targets.pop())


INTERRUPT_REQUESTED = "interrupt_requested"


def interrupt_noted(current: str, stored: dict[str, Any]) -> dict[str, Any] | None:
    """The input of a turn in ``current`` that an interrupt was asked for, or None when
    nothing is to be written (it has ended, or it is noted already)."""
    if current != RUNNING or stored.get(INTERRUPT_REQUESTED):
        return None
    return {**stored, INTERRUPT_REQUESTED: True}


GOAL_TURN = "goal"  # the command of a canonical goal turn (TurnInput.command)
RESUME_SUFFIX = ":resumed"
RESUME_LIMIT = 2  # continuations of one input; a turn that keeps killing its host fails
RESUME_TEXT = ("(amux) The process running this conversation stopped while you were working "
               "on the message below, so that turn was cut short. Continue it where it "
               "stopped: what you already did has taken effect, so do not repeat it.\n\n")


def base_key(key: str) -> str:
    """The key of the input a turn carries on: a continuation's key without its suffixes."""
    return key.split(RESUME_SUFFIX, 1)[0]


@dataclass(frozen=True, slots=True)
class Continuation:
    """The input queued again after a lost host, with the rest of the turn's input (images,
    command, origin) as it was."""

    key: str
    text: str
    parts: list[dict[str, Any]] | None


@dataclass(frozen=True, slots=True)
class HostLost:
    terminal: rt.Event  # the turn's one terminal event
    continuation: Continuation | None


def host_lost(key: str, stored: dict[str, Any], *, archived: bool, code: str,
              message: str) -> HostLost:
    """What a lost host makes of a turn it left running (``key``, its ``stored`` input);
    ``code`` and ``message`` say how the host was lost.

    A host's death is amux's fault, not the agent's: the turn ends cancelled and the same
    input is queued again, so the work a person asked for is not dropped."""
    cancelled = rt.TurnCancelled(reason=code)
    if stored.get(INTERRUPT_REQUESTED) or stored.get("command") == GOAL_TURN:
        return HostLost(cancelled, None)
    if archived or key.count(RESUME_SUFFIX) >= RESUME_LIMIT:
        return HostLost(rt.TurnFailed(code=code, message=message), None)
    text = stored.get("text", "")
    if not text.startswith(RESUME_TEXT):
        text = RESUME_TEXT + text
    parts = list(stored.get("parts") or [])
    said = RESUME_TEXT.rstrip()  # a part of its own, before the input's
    if parts and parts[0].get("text") != said:
        parts.insert(0, {"type": "text", "text": said})
    return HostLost(cancelled, Continuation(key + RESUME_SUFFIX, text, parts or None))
