"""loopx_turn_v0, the pure rules: the gate before an attempt, which todo a turn works, the
envelope's steps, what a turn spends and the scheduler hint after it.

A turn is one bounded transaction: gate → select and claim a todo → one attempt in the
agent's working session → independent validation → writeback → spend → hint. Each step
commits with the envelope's state, so a replay after a crash resumes at the first step not
recorded and repeats none."""

from __future__ import annotations

import re
from dataclasses import dataclass

from goals.core.lifecycle import Refused

HINTS = ("continue", "wait", "replan", "stop")

# the envelope's steps, in order; each names the last step whose effect is committed
QUEUED = "queued"        # gate passed, todo claimed, nothing sent yet
RUNNING = "running"      # the todo was posted into the session: one session turn
VALIDATED = "validated"  # the session turn ended and amux's own check ran
WRITTEN = "written"      # the writeback was decided (accepted or refused) and committed
DONE = "done"            # quota spent (or not) and the hint chosen
SKIPPED = "skipped"      # the gate said no attempt: nothing posted, written or spent
CANCELLED = "cancelled"  # an operator cancelled it: nothing written back, nothing spent
IN_FLIGHT = (QUEUED, RUNNING, VALIDATED, WRITTEN)
SETTLED = (DONE, SKIPPED, CANCELLED)
STATES = (*IN_FLIGHT, *SETTLED)

# a cancelled turn's reason and hint: the operator stopped this work, so the supervisor
# starts no next turn by itself (an autorun loop waits for a person)
CANCEL_REASON = "cancelled"
CANCEL_HINT = "stop"

# an ordinary turn asked for while an inbox event waits for its reply: the inbox turn
# runs first (seed 003), and the hint lets the supervisor go on after it
REPLY_DUE = "reply_due"

KEY_MAX = 100  # the session turn's key is "loopx-" + this key (sessions allow 120)
OUTPUT_CAP = 4000


@dataclass(frozen=True)
class TodoFact:
    id: int
    state: str
    claimed_by: int | None


@dataclass(frozen=True)
class Skip:
    """No attempt: why (content-free) and what the supervisor should do."""

    reason: str
    hint: str


KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


def check_key(key: object) -> str:
    """1 to 100 characters of letters, digits and ``. _ : -``: it names the turn in a URL."""
    if (not isinstance(key, str) or not 0 < len(key) <= KEY_MAX
            or not KEY_PATTERN.fullmatch(key)):
        raise Refused(f"key must be 1 to {KEY_MAX} letters, digits, '.', '_', ':' or '-'",
                      code="invalid", status=400, field="key")
    return key


def gate(*, goal_state: str, quota_remaining: int, has_check: bool) -> Skip | None:
    """Whether the goal admits an attempt now. A goal without a check_command fails closed:
    no attempt could ever be validated, so none is made (the plan needs a check)."""
    if goal_state != "active":
        return Skip(f"goal_{goal_state}", "stop")
    if quota_remaining <= 0:
        return Skip("quota_exhausted", "stop")
    if not has_check:
        return Skip("no_check_command", "replan")
    return None


def eligible(todos: list[TodoFact], agent: int) -> list[TodoFact]:
    """Todos this agent may work: open ones and its own claims, oldest first."""
    return sorted((t for t in todos if t.state == "open"
                   or (t.state == "claimed" and t.claimed_by == agent)), key=lambda t: t.id)


def select_todo(todos: list[TodoFact], agent: int, named: int | None) -> TodoFact | Skip:
    """The named todo (refused naming ``todo`` when this agent cannot work it), else the
    oldest open or claimed-by-this-agent one; none left → ``stop``, or ``wait`` while
    other agents still hold claims."""
    if named is not None:
        todo = next((t for t in todos if t.id == named), None)
        if todo is None:
            raise Refused(f"the goal has no todo {named}", code="invalid", status=400,
                          field="todo")
        if todo not in eligible(todos, agent):
            raise Refused(f"todo {named} is {todo.state}"
                          + (" by another agent" if todo.state == "claimed" else "")
                          + ": this agent cannot work it", code="todo_unavailable",
                          field="todo")
        return todo
    choices = eligible(todos, agent)
    if choices:
        return choices[0]
    if any(t.state == "claimed" for t in todos):
        return Skip("todos_claimed_by_others", "wait")
    return Skip("no_open_todos", "stop")


def spend_amount(unit: str, tokens: int) -> int:
    """What an accepted turn costs: one turn, or the tokens its session turn used."""
    return 1 if unit == "turns" else max(0, tokens)


def charges(*, passed: bool, writeback_accepted: bool) -> bool:
    """Quota is spent only after a passed validation whose writeback was accepted: a failed
    check is not accepted work (its hint, ``replan``, stops an autorun loop instead)."""
    return passed and writeback_accepted


def hint_after(*, goal_state: str, passed: bool, writeback_accepted: bool,
               quota_remaining: int, todos: list[TodoFact], agent: int) -> str:
    if goal_state != "active" or quota_remaining <= 0:
        return "stop"
    if not writeback_accepted:
        return "wait"  # the state moved under the turn (binding or todo): look again
    if not passed:
        return "replan"
    if eligible(todos, agent):
        return "continue"
    return "wait" if any(t.state == "claimed" for t in todos) else "stop"


def supervise_next(*, autorun: bool, managed: bool, live: bool, goal_state: str,
                   quota_remaining: int, in_flight: bool, last_hint: str | None) -> bool:
    """Whether the supervisor starts another turn by itself: only for an agent set to run
    continuously, after a ``continue`` (or before its first turn), never two at once."""
    return (autorun and managed and live and goal_state == "active" and quota_remaining > 0
            and not in_flight and last_hint in (None, "continue"))


def waits_for_turn_end(state: str, *, attempt_running: bool, overdue: bool,
                       cancel_requested: bool, interrupted: bool) -> bool:
    """Whether an envelope needs nobody until its session turn ends: the ``session.turn_ended``
    fact moves it on then (goals/turn_end.py). Not while something must still be asked of
    that turn — an interrupt for an overdue attempt or a cancel, not yet given."""
    if state != RUNNING or not attempt_running:
        return False
    return interrupted or not (overdue or cancel_requested)


def cancel_step(state: str, *, cancel_requested: bool, attempt_running: bool) -> str:
    """What cancelling a turn at ``state`` does — ``attempt_running``: its session turn was
    posted and has not ended (queued in the session or running):

    - ``"same"``: already cancelled, or its cancel already asked for: answer it again, do
      nothing twice;
    - ``"end"``: nothing of it runs (queued: nothing posted yet; running with its session
      turn ended; validated: amux's check ran, nothing written): it ends cancelled now;
    - ``"interrupt"``: its session turn runs: interrupt it through the session; the
      envelope ends cancelled once that turn has ended (so a next turn never overlaps it).

    Refused (409, naming the state): a settled turn (done, skipped), and a written one,
    whose writeback is committed — cancelling it could no longer keep its promise."""
    if state == CANCELLED or (state == RUNNING and cancel_requested):
        return "same"
    if state in (QUEUED, VALIDATED) or (state == RUNNING and not attempt_running):
        return "end"
    if state == RUNNING:
        return "interrupt"
    if state == WRITTEN:
        raise Refused("the turn is written: its writeback is committed and it settles now; "
                      "it can no longer be cancelled", code="turn_written", field="state")
    raise Refused(f"the turn is {state}: there is nothing to cancel", code="turn_settled",
                  field="state")


def cap(text: str, limit: int = OUTPUT_CAP) -> str:
    """The output's tail (where a check's verdict is), cut at ``limit`` characters."""
    if len(text) <= limit:
        return text
    return f"[… {len(text) - limit} earlier characters cut by amux]\n" + text[-limit:]
