"""Evals: the triage of an inferred candidate, and what a new policy version does to one
that is still running. Pure: the actions load and lock the eval and its trigger."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tickets.core.errors import InvalidCommand
from tickets.core.rules import EffectSpec

RESULTS = ("accept", "decline", "needs_person")
_DISPOSITIONS = {"decline": "declined", "needs_person": "needs_person"}


def check_result(result: str) -> None:
    if result not in RESULTS:
        raise InvalidCommand(f"unknown eval result {result!r}")


@dataclass(frozen=True)
class Finished:
    open_ticket: bool  # the candidate becomes a ticket now
    disposition: str  # else: the trigger's disposition


def finished(result: str, *, acceptance: str, thread_bound: bool) -> Finished:
    """An accepted candidate becomes work only in automatic acceptance mode and while no
    ticket holds its thread; otherwise the trigger says why not."""
    if result == "accept" and acceptance == "auto" and not thread_bound:
        return Finished(True, "admitted")
    return Finished(False, _DISPOSITIONS.get(result, "not_accepted"))


class Requeue(StrEnum):
    KEEP = "keep"  # finished meanwhile, or started under the new rules already
    EVALUATE_AGAIN = "evaluate_again"  # a handed-back trigger: a candidate again (auto)
    DROP = "drop"  # a handed-back trigger under manual acceptance: nothing more
    DECIDE_AGAIN = "decide_again"  # the gate decides again under the new version, then route


def requeue(*, state: str, eval_version: str, new_version: str, handed_back: bool,
            auto: bool) -> Requeue:
    """A new policy version discards a running eval (an old judgement does not hold under
    new rules). A trigger a ticket handed back never meets the gate again."""
    if state != "running" or eval_version == new_version:
        return Requeue.KEEP
    if handed_back:
        return Requeue.EVALUATE_AGAIN if auto else Requeue.DROP
    return Requeue.DECIDE_AGAIN


def assess(eval_id: int) -> EffectSpec:
    """The effect that triages one candidate with the configured model."""
    return EffectSpec("assess", f"eval:{eval_id}", {"eval": eval_id})
