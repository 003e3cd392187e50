"""The read side of tickets: stage facts gathered from the database in a few queries."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Max

from amux_common.clock import now as clock
from sessions.capacity import waiting_for_capacity
from sessions.models import Turn, TurnState
from tickets import guarding
from tickets.core import answers, tokens
from tickets.core.failure import Failure, last_failure
from tickets.core.stage import Stage, StageFacts, derive, label
from tickets.models import LIVE_ASSIGNMENT, Assignment, Input, Question, Report, Ticket


def stage_facts(tickets: Iterable[Ticket]) -> dict[int, StageFacts]:
    tickets = list(tickets)
    ids = [t.pk for t in tickets]
    open_questions = set(
        Question.objects.filter(ticket_id__in=ids, answered_at__isnull=True).values_list(
            "ticket_id", flat=True
        )
    )
    undelivered_failed = set(
        Input.objects.filter(
            ticket_id__in=ids, delivered_at__isnull=True, failed_at__isnull=False
        ).values_list("ticket_id", flat=True)
    )
    latest_report: dict[int, str] = {}
    word_times: dict[int, list] = {}  # what the executor's last word is made of
    reports: dict[int, list] = {}
    for ticket_id, status, created in Report.objects.filter(ticket_id__in=ids).order_by(
        "ticket_id", "id"
    ).values_list("ticket_id", "status", "created_at"):
        latest_report[ticket_id] = status
        reports.setdefault(ticket_id, []).append((status, created))
    last_human = dict(
        Input.objects.filter(ticket_id__in=ids, is_human=True)
        .values("ticket_id")
        .annotate(at=Max("created_at"))
        .values_list("ticket_id", "at")
    )
    assignment: dict[int, str] = {}
    failure: dict[int, str] = {}
    turned: set[int] = set()  # tickets whose current run has ended a turn
    for ticket_id, state, ended, last_turn, code in Assignment.objects.filter(
        ticket_id__in=ids
    ).order_by("ticket_id", "id").values_list("ticket_id", "state", "ended_at", "last_turn_at",
                                              "failure_code"):
        assignment[ticket_id] = state
        word_times.setdefault(ticket_id, []).extend((ended, last_turn))
        failure[ticket_id] = code
        if last_turn is None:
            turned.discard(ticket_id)
        else:
            turned.add(ticket_id)
    busy = set(Turn.objects.filter(
        session_id__in=[t.session_id for t in tickets if t.session_id],
        state__in=(TurnState.QUEUED, TurnState.RUNNING)).values_list("session_id", flat=True))
    caps = guarding.reached(tickets, clock())
    no_room = waiting_for_capacity(t.session_id for t in tickets)
    facts = {}
    for t in tickets:
        # Anything a person gave (a message, an answer, an operator's input) counts here.
        word = answers.last_word(reports.get(t.pk, ()), word_times.get(t.pk, ()))
        spoke = answers.spoke_after(last_human.get(t.pk), word)
        facts[t.pk] = StageFacts(
            ended=t.ended_at is not None,
            open_question=t.pk in open_questions,
            undelivered_failed_input=t.pk in undelivered_failed,
            latest_report=latest_report.get(t.pk),
            person_spoke_since_report=spoke,
            assignment=assignment.get(t.pk),
            pr_open=t.pr_state == "open",
            failure=failure.get(t.pk, ""),
            cap=caps[t.pk].text if caps[t.pk] else "",
            waiting_for_capacity=t.session_id in no_room,
            turn_settled=t.pk in turned and t.session_id not in busy,
            end_reason=t.end_reason,
        )
    return facts


def assignment_for_token(token: str) -> Assignment | None:
    """The live assignment a bearer token was issued for, or None."""
    if not tokens.looks_like_token(token):
        return None
    return (
        Assignment.objects.filter(token_hash=tokens.token_hash(token),
                                  state__in=["dispatching", "running"])
        .select_related("ticket")
        .first()
    )


def stages(tickets: Iterable[Ticket]) -> dict[int, tuple[Stage, str]]:
    return {pk: (stage, label(stage, f)) for pk, f in stage_facts(tickets).items()
            for stage in [derive(f)]}


def failures(tickets: Iterable[Ticket]) -> dict[int, Failure | None]:
    """Each ticket's failure: its last run's, when that run failed (else None)."""
    ids = [t.pk for t in tickets]
    last: dict[int, tuple] = {}
    for row in Assignment.objects.filter(ticket_id__in=ids).order_by("ticket_id", "id") \
            .values_list("ticket_id", "state", "failure_code", "failure_message", "ended_at",
                         "end_reason"):
        last[row[0]] = row[1:]
    return {pk: last_failure(*last[pk]) if pk in last else None for pk in ids}


def briefed(ticket_id: int, session_id: int | None) -> bool:
    """Whether the ticket's live run (if any) has its brief in the worker session: the
    run's start effect posts it once the clone is made (effect_handlers.start_run)."""
    live = (Assignment.objects.filter(LIVE_ASSIGNMENT, ticket_id=ticket_id).order_by("-pk")
            .values_list("pk", flat=True).first())
    return live is None or (session_id is not None and Turn.objects.filter(
        session_id=session_id, key=brief_key(live)).exists())


def brief_key(assignment_id: int) -> str:
    """The input key of a run's brief: it is posted once, whatever replays."""
    return f"assignment:{assignment_id}"
