"""An attached agent's "done" (seed 003, attached writeback through LoopX): its word alone
never makes a todo done. The todo stays claimed while amux runs the goal's own check in the
agent's session, then becomes done with evidence and spends quota like a managed turn's
accepted writeback — one turn, or the tokens the session spent on it since the claim — or
stays claimed with the reason. Pure: goals/writeback.py applies it under the goal's lock."""

from __future__ import annotations

from dataclasses import dataclass

from goals.core import quota
from goals.core import turns as turn_rules

VALIDATING, ACCEPTED, REFUSED = "validating", "accepted", "refused"
# Why a writeback was refused: the todo keeps the agent's claim and says so.
NO_CHECK = "no_check_command"      # a goal without a check fails closed, as a managed turn
CHECK_FAILED = "check_failed"
BINDING_LOST = "binding_lost"      # detached (or rebound) before the check answered
QUOTA_EXHAUSTED = "quota_exhausted"
TODO_MOVED = "todo_moved"          # someone else changed the todo meanwhile
GOAL_CLOSED = "goal_closed"


@dataclass(frozen=True)
class Outcome:
    accepted: bool
    reason: str  # "" when accepted
    spend: int


def outcome(*, goal_state: str, has_check: bool, passed: bool, binding_live: bool,
            still_claimed: bool, unit: str, limit: int, spent: int, tokens: int) -> Outcome:
    """The verdict on one writeback, in the order a person would ask: is it still ours,
    was it checked, did the check pass, is there quota left to pay for it."""
    if not still_claimed:
        return Outcome(False, TODO_MOVED, 0)
    if goal_state != "active":
        return Outcome(False, GOAL_CLOSED, 0)
    if not binding_live:
        return Outcome(False, BINDING_LOST, 0)
    if not has_check:
        return Outcome(False, NO_CHECK, 0)
    if not passed:
        return Outcome(False, CHECK_FAILED, 0)
    left = quota.remaining(limit, spent)
    if left <= 0:
        return Outcome(False, QUOTA_EXHAUSTED, 0)
    # like a managed tokens turn, the last one may overrun what is left: it spends the rest
    return Outcome(True, "", min(turn_rules.spend_amount(unit, tokens), left))


def evidence(agent_evidence: str, command: str, exit_code: int | None, output: str) -> str:
    """The done todo's evidence: what the agent said, and amux's own check that held."""
    tail = output.strip()[-1500:] or "(no output)"
    return (f"{agent_evidence.strip()}\n\nchecked by amux: `{command}` passed "
            f"(exit {exit_code})\n{tail}")
