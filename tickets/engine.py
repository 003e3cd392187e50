"""The only writer of ticket-domain state (ARCHITECTURE.md "The engine").

Each public function is one command (imperative; may be refused with a typed error from
tickets.core.errors) or one fact reported by an executor (past tense; never refused). Each
runs in one durable transaction, locks its aggregate root through tickets.locks, lets the
pure rules in tickets.core decide, saves, and enqueues external work as outbox rows in the
same transaction; the outbox kicks a drainer on commit.
"""

from __future__ import annotations

import hashlib
import secrets

from django.db import IntegrityError, transaction

from amux_common.clock import now as clock
from tickets import locks, outbox
from tickets.core import rules
from tickets.core.errors import InvalidCommand, NotFound, ThreadAlreadyBound
from tickets.models import (
    LIVE_ASSIGNMENT,
    Assignment,
    Input,
    Mandate,
    Subscription,
    Thread,
    Ticket,
    Trigger,
)


def _enqueue(plan: rules.Plan) -> None:
    for effect in plan.effects:
        outbox.enqueue(effect.kind, effect.key, effect.payload, channel=effect.channel)


def _view(ticket: Ticket) -> rules.TicketView:
    live = (
        Assignment.objects.filter(LIVE_ASSIGNMENT, ticket=ticket)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    return rules.TicketView(id=ticket.pk, ended=ticket.ended_at is not None, live_assignment=live)


def _new_assignment(ticket: Ticket, attempt: int = 1) -> tuple[Assignment, str]:
    """An assignment with its scoped token; only the token's hash is stored."""
    token = secrets.token_urlsafe(32)
    assignment = Assignment.objects.create(
        ticket=ticket,
        attempt=attempt,
        token_hash=hashlib.sha256(token.encode()).hexdigest(),
    )
    return assignment, token


# --- commands ---------------------------------------------------------------------------


def open_ticket(*, trigger_id: int, title: str) -> Ticket:
    """Accept a trigger as work: the ticket, its immutable mandate, the subscription to its
    thread and the first assignment, dispatched through the outbox."""
    title = (title or "").strip()
    if not title:
        raise InvalidCommand("title must not be empty")
    with transaction.atomic(durable=True):
        trigger = (
            Trigger.objects.select_for_update(no_key=True)
            .select_related("source", "thread")
            .filter(pk=trigger_id)
            .first()
        )
        if trigger is None:
            raise NotFound(f"trigger {trigger_id} does not exist")
        if trigger.decision not in ("explicit", "inferred") or not trigger.strength:
            raise InvalidCommand(f"trigger {trigger_id} was not admitted by the policy")
        if Subscription.objects.filter(thread=trigger.thread).exists():
            raise ThreadAlreadyBound(
                f"thread {trigger.thread} already belongs to a ticket; follow-ups flow there"
            )
        ticket = Ticket.objects.create(
            short_name=f"pending-{secrets.token_hex(8)}", title=title[:300], thread=trigger.thread
        )
        ticket.short_name = rules.short_name(ticket.pk, title)
        ticket.save(update_fields=["short_name"])
        Mandate.objects.create(
            ticket=ticket,
            trigger=trigger,
            policy_version=trigger.policy_version,
            scope=trigger.scope,
            strength=trigger.strength,
            rule=trigger.rule,
            requester=trigger.actor,
            basis={
                "source": trigger.source.slug,
                "source_kind": trigger.source.kind,
                "scope": trigger.scope,
                "addressed": trigger.addressed,
                "receives_all": trigger.receives_all,
                "trigger": trigger.external_id,
            },
        )
        Subscription.objects.create(ticket=ticket, thread=trigger.thread)
        trigger.disposition = "admitted"
        trigger.save(update_fields=["disposition"])
        assignment, _token = _new_assignment(ticket)
        _enqueue(rules.open_plan(ticket.pk, assignment.pk))
    return ticket


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
            raise ThreadAlreadyBound(f"thread {thread} was bound meanwhile") from exc


def stop_ticket(*, ticket_id: int, by: str) -> Ticket:
    """An operator ends a ticket now; its live assignment is told to stop."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        plan = rules.stop(_view(ticket), by=by, now=clock())
        for name, value in plan.changes.items():
            setattr(ticket, name, value)
        ticket.save(update_fields=list(plan.changes))
        _enqueue(plan)
    return ticket


def add_input(*, ticket_id: int, text: str, author: str, kind: str = "operator",
              is_human: bool = True) -> Input:
    """Give the executor something to read; delivered into its session by the outbox."""
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        rules.add_input(_view(ticket), text=text)
        item = Input.objects.create(
            ticket=ticket, kind=kind, text=text, author=author, is_human=is_human
        )
        effect = rules.deliver(item.pk, ticket.pk)
        outbox.enqueue(effect.kind, effect.key, effect.payload)
    return item


# --- facts ------------------------------------------------------------------------------


def assignment_started(*, assignment_id: int, session_id: int | None = None) -> None:
    with transaction.atomic(durable=True):
        ticket, assignment = locks.ticket_of_assignment(assignment_id)
        if assignment.state in ("ended", "failed"):
            return  # stopped meanwhile: the late fact changes nothing
        assignment.state = "running"
        assignment.started_at = assignment.started_at or clock()
        assignment.save(update_fields=["state", "started_at"])
        if session_id is not None and ticket.session_id != session_id:
            ticket.session_id = session_id
            ticket.save(update_fields=["session"])


def assignment_ended(*, assignment_id: int, reason: str = "", failed: bool = False) -> None:
    with transaction.atomic(durable=True):
        _ticket, assignment = locks.ticket_of_assignment(assignment_id)
        if assignment.state in ("ended", "failed"):
            return
        assignment.state = "failed" if failed else "ended"
        assignment.ended_at = clock()
        assignment.end_reason = reason[:60]
        assignment.save(update_fields=["state", "ended_at", "end_reason"])


def input_delivered(*, input_id: int) -> None:
    with transaction.atomic(durable=True):
        _ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is None:
            item.delivered_at = clock()
            item.failed_at = None
            item.failure = ""
            item.save(update_fields=["delivered_at", "failed_at", "failure"])


def delivery_failed(*, input_id: int, reason: str) -> None:
    with transaction.atomic(durable=True):
        _ticket, item = locks.ticket_of_input(input_id)
        if item.delivered_at is not None:
            return  # a late failure after a success changes nothing
        item.failed_at = clock()
        item.failure = reason[:200]
        item.save(update_fields=["failed_at", "failure"])
