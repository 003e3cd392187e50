"""What a worker's run reports, through the outbox handlers and its scoped tools: started,
ended, a turn ended, an input delivered or not, a report, a question, a reply, work handed
back; and the bearer token its tools carry."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from amux_common.clock import now as clock
from intake.models import Trigger
from tickets import locks, read
from tickets.actions import common
from tickets.actions import guards as guard_actions
from tickets.actions import messages as outgoing
from tickets.actions.routing import start_eval
from tickets.core import failure as failures
from tickets.core import guards, messages, rules, runs, tokens
from tickets.core.errors import NotFound
from tickets.models import LIVE_ASSIGNMENT, Assignment, Input, Question, Report, Ticket
from tickets.policy_hooks import acceptance_mode


def issue_assignment_token(*, assignment_id: int) -> str:
    """A new bearer token scoped to one assignment (the executor's tools use it). Issued at
    dispatch; issuing again (a re-dispatch after a crash) invalidates the old one. Only the
    hash is stored."""
    token = tokens.new_token()
    with transaction.atomic(durable=True):
        _ticket, assignment = locks.ticket_of_assignment(assignment_id)
        common.save_changes(assignment, {"token_hash": tokens.token_hash(token)})
    return token


def assignment_started(*, assignment_id: int, session_id: int | None = None) -> None:
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        _started(ticket, assignment, session_id)


def _started(ticket: Ticket, assignment: Assignment, session_id: int | None) -> None:
    if not common.save_changes(
            assignment, runs.started(assignment.state, assignment.started_at, clock())):
        return  # stopped meanwhile: the late fact changes nothing
    if session_id is not None and ticket.session_id != session_id:
        ticket.session_id = session_id
        ticket.save(update_fields=["session"])


def run_dispatched(*, assignment_id: int,
                   open_session: Callable[[Ticket, str], int | failures.Failure]
                   ) -> guards.Reached | None:
    """A run's dispatch, decided and written whole in one transaction: the caps looked at
    (a reached cap holds the run: answered, the effect waits until it resets), then
    ``open_session`` — given the run's new bearer token, it writes the worker's session
    (the ticket's own when it has one) in this same transaction and answers its id, or
    the failure that keeps it from running (no worker settings, a refusal of the session
    layer: the run fails visibly) — the token's hash and the run started on that session.
    What lies outside the database — the clone, the first message that starts the
    runtime — is the effect (rules.start_run) written with it. A fault part-way leaves
    none of it; the effect that asked runs it again. None also when the run was stopped,
    or started, meanwhile."""
    token = tokens.new_token()
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        if assignment.state != "dispatching" or ticket.ended_at is not None:
            return None
        held = guard_actions.note_hold(ticket, assignment)
        if held is not None:
            return held
        opened = open_session(ticket, token)
        if isinstance(opened, failures.Failure):
            _ended(ticket, assignment, failure=opened)
            return None
        common.save_changes(assignment, {"token_hash": tokens.token_hash(token)})
        _started(ticket, assignment, opened)
        common.enqueue(rules.start_run(assignment.pk, ticket.pk, opened))
    return None


def run_start_failed(*, assignment_id: int, session_id: int,
                     failure: failures.Failure) -> None:
    """Fact: the working copy or the worker's commands could not be made for a started
    run (on ``session_id``); the run fails with why, unless it ended or moved on meanwhile."""
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        if ticket.session_id == session_id:
            _ended(ticket, assignment, failure=failure)


def run_briefed(*, assignment_id: int) -> None:
    """Fact: a started run's brief is in its session (its clone made): the inputs that
    waited for it are due now, in their order, after it."""
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        waiting = Input.objects.filter(ticket=ticket, delivered_at__isnull=True,
                                       failed_at__isnull=True,
                                       kind__in=common.DELIVERED_KINDS).order_by("pk")
        common.enqueue(*(rules.deliver(pk, ticket.pk)
                         for pk in waiting.values_list("pk", flat=True)))


def assignment_ended(*, assignment_id: int, reason: str = "", failed: bool = False,
                     failure: failures.Failure | None = None) -> None:
    """Fact: a run ended; a failed one keeps its failure whole (code and message)."""
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        _ended(ticket, assignment, reason=reason, failed=failed, failure=failure)


def _ended(ticket: Ticket, assignment: Assignment, *, reason: str = "",
           failed: bool = False, failure: failures.Failure | None = None) -> None:
    if failure is not None:
        reason, failed = failure.code, True
    now = clock()
    changes = runs.ended(assignment.state, reason=reason, failed=failed, failure=failure,
                         now=now)
    if common.save_changes(assignment, changes):
        common.end_if_due(ticket, now)


def worker_turn_ended(*, session_id: int, state: str, error_code: str = "",
                      error_message: str = "", ended_at: datetime | None = None) -> None:
    """Fact: the worker session of a ticket finished a turn. A failed turn fails the run
    (the stage says so until a person speaks); any end of turn answers the messages the
    worker owned, so a closed PR may now end the ticket."""
    ticket_id = (
        Ticket.objects.filter(session_id=session_id).values_list("pk", flat=True).first()
    )
    if ticket_id is None:
        return  # not a worker session
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        assignment = (
            Assignment.objects.filter(LIVE_ASSIGNMENT, ticket=ticket).order_by("-pk").first()
        )
        if assignment is None:
            return
        now = clock()
        common.save_changes(assignment, runs.turn_ended(
            state, error_code=error_code, error_message=error_message,
            ended_at=ended_at or now))
        common.end_if_due(ticket, now)


def input_delivered(*, input_id: int) -> None:
    with transaction.atomic(durable=True):
        _ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is None:
            common.save_changes(item, {"delivered_at": clock(), "failed_at": None,
                                       "failure": ""})


def input_waiting(*, input_id: int) -> failures.Delivery:
    """Fact: a `deliver` effect found no worker session for its input, or one whose live
    run has no brief yet. While a run is being dispatched or started it waits (bounded:
    the dispatch settles either way; its start makes the input due again,
    `run_briefed`); with no run that could take it the input is marked not delivered,
    with the run's failure as reason."""
    with transaction.atomic(durable=True):
        ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is not None or item.failed_at is not None:
            return failures.Delivery.UNDELIVERABLE  # settled already
        facts = common.run_facts(ticket)
        verdict = failures.delivery(has_session=ticket.session_id is not None,
                                    ended=facts.ended, live_assignment=facts.live_assignment,
                                    briefed=read.briefed(ticket.pk, ticket.session_id))
        if verdict is failures.Delivery.UNDELIVERABLE:
            common.save_changes(item, {
                "failed_at": clock(),
                "failure": failures.undelivered_reason(common.last_failure(ticket),
                                                       facts.ended)})
        return verdict


def delivery_failed(*, input_id: int, reason: str) -> None:
    with transaction.atomic(durable=True):
        _ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is not None:
            return  # a late failure after a success changes nothing
        common.save_changes(item, {"failed_at": clock(), "failure": reason})


def report_received(*, assignment_id: int, status: str, text: str = "") -> Report:
    """Fact: the executor reported. Blocked and failed reports are relayed to the thread;
    progress and done are not (the PR speaks for itself)."""
    messages.check_report(status, text)
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        now = clock()
        report = Report.objects.create(
            ticket=ticket, assignment=assignment, status=status, text=text
        )
        if messages.relayed(status, text):
            outgoing.relay(ticket, f"report:{report.pk}", text, now)
        common.end_if_due(ticket, now)
    return report


def question_asked(*, assignment_id: int, text: str, options: list | None = None,
                   multi: bool = False, message_ref: str = "") -> Question:
    """Fact: the executor asked a structured question; only this waits for a person."""
    options = messages.check_question(text, options)
    with transaction.atomic(durable=True):
        ticket, _assignment = locks.ticket_of_assignment(assignment_id)
        question = Question.objects.create(
            ticket=ticket, text=text, options=options, multi=multi, message_ref=message_ref[:300]
        )
        outgoing.relay(ticket, f"question:{question.pk}", messages.question_text(text, options),
                       clock())
    return question


def reply_requested(*, assignment_id: int, text: str) -> None:
    """The executor posts on its thread through the source (ordered per thread).

    The run and the text are the reply's idempotency key: an executor that asks again
    because a crash cut the answer to its first ask (or a turn resumed after its host died
    repeats it) gets the same effect while it waits, and the same message id once sent, so
    the thread shows it once."""
    messages.check_text(text, "reply text")
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        key, message_id = rules.reply_key(assignment.pk, text)
        outgoing.relay(ticket, key, text, clock(), message_id=message_id)


def hand_back(*, assignment_id: int, trigger_id: int, reason: str) -> Trigger:
    """Work outside the mandate goes back; only now may it become an eval candidate."""
    messages.check_text(reason, "reason")
    with transaction.atomic(durable=True):
        ticket, _assignment = locks.ticket_of_assignment(assignment_id)
        trigger = Trigger.objects.select_for_update(no_key=True).filter(pk=trigger_id).first()
        if trigger is None or not Input.objects.filter(ticket=ticket, trigger=trigger).exists():
            raise NotFound(f"trigger {trigger_id} is not a message this ticket received")
        common.save_changes(trigger, {"disposition": "handed_back", "reason": reason[:80]})
        if acceptance_mode() == "auto":
            start_eval(trigger)
    return trigger
