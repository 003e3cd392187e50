"""What operators (the panel, the REST API) and intake do to a ticket: open it, bind a
thread, stop it, give it an input, retry it, answer its question."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery

from amux_common.clock import now as clock
from amux_common.integrity import violates
from intake.models import Thread
from tickets import guarding, locks
from tickets.actions import common, guards
from tickets.actions import messages as outgoing
from tickets.core import failure as failures
from tickets.core import guards as caps
from tickets.core import messages, rules
from tickets.core.errors import InvalidCommand, NotFound, ThreadAlreadyBound
from tickets.models import Assignment, Input, Question, Subscription, Ticket

SUBSCRIPTION_THREAD = "tickets_subscription_thread_id_key"  # one ticket per thread


def open_ticket(*, trigger_id: int, title: str) -> Ticket:
    """Accept a trigger as work: the ticket, its immutable mandate, the subscription to its
    thread and the first assignment, dispatched through the outbox."""
    with transaction.atomic(durable=True):
        return common.open_ticket(locks.trigger(trigger_id), title)


def bind_thread(*, ticket_id: int, thread_id: int) -> Subscription:
    """Subscribe one more thread to a ticket (e.g. the PR it opened): its follow-ups flow in."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        thread = Thread.objects.filter(pk=thread_id).first()
        if thread is None:
            raise NotFound(f"thread {thread_id} does not exist")
        existing = Subscription.objects.filter(thread=thread).first()
        if existing is not None:
            if existing.ticket_id == ticket.pk:
                return existing
            raise ThreadAlreadyBound(f"thread {thread} belongs to ticket {existing.ticket_id}")
        try:
            with transaction.atomic():
                return Subscription.objects.create(ticket=ticket, thread=thread)
        except IntegrityError as exc:
            if not violates(exc, SUBSCRIPTION_THREAD):
                raise
            raise ThreadAlreadyBound(f"thread {thread} was bound meanwhile") from exc


def stop_ticket(*, ticket_id: int, by: str) -> Ticket:
    """An operator ends a ticket now; its live assignment is told to stop."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        common.apply(ticket, rules.stop(common.view(ticket), by=by, now=clock()))
    return ticket


def add_input(*, ticket_id: int, text: str, author: str, kind: str = "operator",
              is_human: bool = True) -> Input:
    """Give the executor something to read; delivered into its session by the outbox."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        rules.add_input(common.view(ticket), text=text)
        item = Input.objects.create(
            ticket=ticket, kind=kind, text=text, author=author, is_human=is_human
        )
        common.deliver(ticket, item, person_first=is_human)
    return item


def retry_ticket(*, ticket_id: int) -> Assignment | None:
    """An operator dispatches a failed ticket again (refused when it ended or has not
    failed). On a ticket a cap blocked, Retry waives what was spent so far (one more cap's
    worth), sends its held messages and lets its held inputs and dispatch go."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        now = clock()
        found = guarding.reached([ticket], now)[ticket.pk]
        if found is None:
            return common.redispatch(ticket, failures.Cause.RETRY)
        spend = guarding.spends([ticket], now)[ticket.pk]
        before = caps.Waiver.from_dict(ticket.guard_waiver)
        ticket.guard_waiver = caps.waive(found, spend, now, before).as_dict()
        ticket.save(update_fields=["guard_waiver"])
        if found.cap == caps.HOURLY_MESSAGES:
            outgoing.release(ticket, now, everything=True)
        guards.release_held_work(ticket)
        if common.run_facts(ticket).last_state == "failed":
            return common.redispatch(ticket, failures.Cause.RETRY)
        return None


def answer_question(*, question_id: int, answer, by: str) -> Input:
    """A person answers an open question; the answer reaches the executor as an input."""
    with transaction.atomic(durable=True):
        ticket_id = Question.objects.filter(pk=question_id).values_list("ticket_id", flat=True)
        ticket_id = ticket_id.first()
        if ticket_id is None:
            raise NotFound(f"question {question_id} does not exist")
        ticket = locks.ticket(ticket_id)
        question = Question.objects.get(pk=question_id)
        if question.answered_at is not None:
            raise InvalidCommand("this question has already been answered")
        text = answer if isinstance(answer, str) else ", ".join(map(str, answer or []))
        messages.check_text(text, "answer")
        rules.add_input(common.view(ticket), text=text)
        question.answered_at = clock()
        question.answer = answer
        question.save(update_fields=["answered_at", "answer"])
        item = Input.objects.create(
            ticket=ticket, kind="answer", text=f"Answer to “{question.text}”: {text}", author=by
        )
        common.deliver(ticket, item, person_first=True)  # the new run first: the answer follows
    return item


def save_agent_settings(changes: dict) -> list[int]:
    """Save the agent settings (`changes`: field name → value, validated by the caller's
    form or serializer) and act on them in the same transaction: every live ticket whose
    last run failed is dispatched again (the new settings may be what it lacked), and what
    a raised cap no longer holds goes now. Tickets are locked in id order after the
    settings row. Answers the tickets dispatched again."""
    with transaction.atomic(durable=True):
        row = locks.agent_settings()
        for name, value in changes.items():
            setattr(row, name, value)
        row.save()
        failed = set(_last_run_failed())
        again = []
        for ticket_id in sorted(failed | guards.holding()):
            ticket = locks.ticket(ticket_id)
            if ticket_id in failed and common.redispatch(
                    ticket, failures.Cause.SETTINGS) is not None:
                again.append(ticket_id)
            guards.recheck(ticket)
    return again


def _last_run_failed() -> list[int]:
    latest = Assignment.objects.filter(ticket=OuterRef("pk")).order_by("-pk")
    return list(Ticket.objects.filter(ended_at__isnull=True)
                .annotate(last_state=Subquery(latest.values("state")[:1]))
                .filter(last_state="failed").values_list("pk", flat=True))
