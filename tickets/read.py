"""The read side of tickets: stage facts gathered from the database in a few queries."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Max

from amux_common.clock import now as clock
from sessions.capacity import waiting_for_capacity
from tickets import guarding
from tickets.core.failure import Failure, last_failure
from tickets.core.stage import Stage, StageFacts, derive, label
from tickets.models import Assignment, Input, Question, Report, Ticket


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
    latest_report: dict[int, tuple[str, object]] = {}
    for ticket_id, status, created in Report.objects.filter(ticket_id__in=ids).order_by(
        "ticket_id", "id"
    ).values_list("ticket_id", "status", "created_at"):
        latest_report[ticket_id] = (status, created)
    last_human = dict(
        Input.objects.filter(ticket_id__in=ids, is_human=True)
        .values("ticket_id")
        .annotate(at=Max("created_at"))
        .values_list("ticket_id", "at")
    )
    assignment: dict[int, str] = {}
    assignment_end: dict[int, object] = {}
    failure: dict[int, str] = {}
    for ticket_id, state, ended, code in Assignment.objects.filter(ticket_id__in=ids).order_by(
        "ticket_id", "id"
    ).values_list("ticket_id", "state", "ended_at", "failure_code"):
        assignment[ticket_id] = state
        assignment_end[ticket_id] = ended
        failure[ticket_id] = code
    caps = guarding.reached(tickets, clock())
    no_room = waiting_for_capacity(t.session_id for t in tickets)
    facts = {}
    for t in tickets:
        report = latest_report.get(t.pk)
        # A person spoke after the executor's last word (a report, or a failed run).
        last_word = max(
            [x for x in (report[1] if report else None, assignment_end.get(t.pk)) if x],
            default=None,
        )
        spoke = bool(last_word and last_human.get(t.pk) and last_human[t.pk] > last_word)
        facts[t.pk] = StageFacts(
            ended=t.ended_at is not None,
            open_question=t.pk in open_questions,
            undelivered_failed_input=t.pk in undelivered_failed,
            latest_report=report[0] if report else None,
            person_spoke_since_report=spoke,
            assignment=assignment.get(t.pk),
            pr_open=t.pr_state == "open",
            failure=failure.get(t.pk, ""),
            cap=caps[t.pk].text if caps[t.pk] else "",
            waiting_for_capacity=t.session_id in no_room,
        )
    return facts


def assignment_for_token(token: str) -> Assignment | None:
    """The live assignment a bearer token was issued for, or None."""
    import hashlib

    if not token or not token.startswith("amx_"):
        return None
    digest = hashlib.sha256(token.encode()).hexdigest()
    return (
        Assignment.objects.filter(token_hash=digest, state__in=["dispatching", "running"])
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
