"""Where a trigger goes once the gate has decided (seed 002: two fates of a message).

Path B first: a message on a thread that a ticket subscribes to flows to that ticket as
context, from anyone, with no new authority and no admission check. Only messages on
unsubscribed threads meet the gate's decision: an explicit request becomes a ticket
directly, an inferred candidate goes to an eval (never in manual acceptance mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Route(StrEnum):
    FOLLOW_UP = "follow_up"  # an input for the subscribed live ticket
    REVIVE = "revive"  # a person spoke on an ended ticket's thread: same mandate, new run
    RECORD = "record"  # context for an ended ticket that wakes nobody (bots, CI)
    OPEN = "open"  # an explicit request: a ticket now
    EVALUATE = "evaluate"  # an inferred candidate: triage first
    NOT_ACCEPTED = "not_accepted"  # inferred, but acceptance is manual
    IGNORE = "ignore"


@dataclass(frozen=True)
class RoutingFacts:
    decision: str  # explicit / inferred / ignore
    acceptance: str  # manual / auto
    is_human: bool
    own_message: bool = False
    subscribed_ticket: int | None = None
    ticket_ended: bool = False


def route(f: RoutingFacts) -> Route:
    if f.own_message:
        return Route.IGNORE
    if f.subscribed_ticket is not None:
        if not f.ticket_ended:
            return Route.FOLLOW_UP
        return Route.REVIVE if f.is_human else Route.RECORD
    if f.decision == "explicit":
        return Route.OPEN
    if f.decision == "inferred":
        return Route.EVALUATE if f.acceptance == "auto" else Route.NOT_ACCEPTED
    return Route.IGNORE


def disposition(taken: Route) -> str:
    """The trigger's disposition for the route it took."""
    if taken is Route.OPEN:
        return "admitted"
    return "evaluating" if taken is Route.EVALUATE else str(taken)


@dataclass(frozen=True)
class EndFacts:
    """Whether a ticket may end now (seed 002 结束条件): its pull request was merged or
    closed, or its own issue was closed while none of its pull requests is open."""

    pr_final: bool  # merged or closed
    assignment_in_flight: bool  # a resume or retry is being dispatched
    unanswered_follow_up: bool  # the executor owns a person's message it has not answered
    issue_closed: bool = False  # the ticket's own issue is closed
    pr_open: bool = False  # one of the ticket's pull requests is open
    merged: bool = False


def may_end(f: EndFacts) -> bool:
    due = f.pr_final or (f.issue_closed and not f.pr_open)
    return due and not f.assignment_in_flight and not f.unanswered_follow_up


def end_reason(f: EndFacts) -> str | None:
    """Why the ticket ends now (`merged`, `pr_closed`, `issue_closed`), or None."""
    if not may_end(f):
        return None
    if f.pr_final:
        return "merged" if f.merged else "pr_closed"
    return "issue_closed"
