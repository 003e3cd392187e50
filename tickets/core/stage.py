"""A ticket's stage, derived from facts (seed 002: 七个阶段, first match wins).

There is no status field: if the facts are right, the label is right. Only a structured
question makes a ticket wait for a person; free text never changes the stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tickets.core.failure import reason
from tickets.core.resume import WHY, refused_why


class Stage(StrEnum):
    ENDED = "ended"
    WAITING_FOR_PERSON = "waiting_for_person"
    INPUT_NOT_DELIVERED = "input_not_delivered"
    FAILED = "failed"
    BLOCKED = "blocked"
    AWAITING_REVIEW = "awaiting_review"
    IDLE = "idle"
    WORKING = "working"
    WAITING_FOR_CAPACITY = "waiting_for_capacity"
    QUEUED = "queued"


# Labels say who is waited on and for what, never internal codes.
LABELS = {
    Stage.ENDED: "Ended",
    Stage.WAITING_FOR_PERSON: "Waiting for your answer",
    Stage.INPUT_NOT_DELIVERED: "Input not delivered",
    Stage.FAILED: "Failed — needs a look",
    Stage.BLOCKED: "Blocked — needs a person",
    Stage.AWAITING_REVIEW: "Awaiting your review",
    Stage.IDLE: "Agent stopped without a report — tell it what's next",
    Stage.WORKING: "Agent working",
    Stage.WAITING_FOR_CAPACITY: "Waiting for capacity — every agent slot is busy",
    Stage.QUEUED: "Queued for the agent",
}

NEEDS_ME = (Stage.WAITING_FOR_PERSON, Stage.INPUT_NOT_DELIVERED, Stage.FAILED, Stage.BLOCKED,
            Stage.IDLE)
MOVING = (Stage.WORKING, Stage.WAITING_FOR_CAPACITY, Stage.QUEUED, Stage.AWAITING_REVIEW)


@dataclass(frozen=True)
class StageFacts:
    ended: bool = False
    open_question: bool = False
    undelivered_failed_input: bool = False
    latest_report: str | None = None  # progress / done / blocked / failed
    person_spoke_since_report: bool = False
    assignment: str | None = None  # dispatching / running / ended / failed
    pr_open: bool = False
    failure: str = ""  # the failed run's code (tickets/core/failure.py)
    cap: str = ""  # a guard reached, in words (tickets/core/guards.py Reached.text)
    # the worker session has input waiting and no host: every runtime slot is held by
    # another awake session (sessions/capacity.py); it starts when one frees
    waiting_for_capacity: bool = False
    # the worker ended a turn and has none queued or running: nothing moves until someone
    # acts (an agent that stopped without `amux report done` or `blocked`)
    turn_settled: bool = False
    end_reason: str = ""  # why an ended ticket ended (e.g. not_resumable:source_disabled)


def derive(f: StageFacts) -> Stage:
    if f.ended:
        return Stage.ENDED
    if f.cap:  # nothing reaches the worker until the cap resets, is raised or waived
        return Stage.BLOCKED
    if f.open_question:
        return Stage.WAITING_FOR_PERSON
    if f.undelivered_failed_input:
        return Stage.INPUT_NOT_DELIVERED
    # A new message from a person hands a failed or blocked ticket back to the executor.
    if not f.person_spoke_since_report:
        if f.latest_report == "failed" or (f.assignment == "failed" and not f.latest_report):
            return Stage.FAILED
        if f.latest_report == "blocked":
            return Stage.BLOCKED
        if f.latest_report == "done" and f.pr_open:
            return Stage.AWAITING_REVIEW
    if f.waiting_for_capacity and f.assignment in ("dispatching", "running"):
        return Stage.WAITING_FOR_CAPACITY
    if f.assignment == "running" and f.turn_settled:
        if f.pr_open:  # it stopped with its pull request open: the review is next
            return Stage.AWAITING_REVIEW
        if f.latest_report != "done" or f.person_spoke_since_report:
            return Stage.IDLE
    if f.assignment == "running":
        return Stage.WORKING
    return Stage.QUEUED


def label(stage: Stage, f: StageFacts) -> str:
    """The stage in a person's words; a failed run names its reason."""
    if stage is Stage.FAILED and f.assignment == "failed" and f.failure:
        return f"Failed — {reason(f.failure)}"
    if stage is Stage.BLOCKED and f.cap:
        return f"Blocked — {f.cap}"
    refused = refused_why(f.end_reason) if stage is Stage.ENDED else None
    if refused:
        return f"Ended — could not resume: {WHY[refused]}"
    return LABELS[stage]
