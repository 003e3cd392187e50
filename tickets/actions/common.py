"""What several actions share: applying a plan, a run's facts, a new run, a new ticket,
and the end of a ticket. Called with the ticket's lock held, inside the action's
transaction (never a transaction of its own)."""

from __future__ import annotations

import secrets
from datetime import datetime

from amux_common.clock import now as clock
from effects import outbox
from intake.models import Channel, Thread, Trigger
from policy.gate import Facts
from sessions import model_credentials
from tickets.actions import messages
from tickets.core import answers, resume, rules
from tickets.core import failure as failures
from tickets.core.errors import InvalidCommand, ThreadAlreadyBound
from tickets.core.routing import EndFacts, end_reason
from tickets.models import LIVE_ASSIGNMENT, Assignment, Input, Mandate, Report, Subscription, Ticket
from tickets.policy_hooks import source_standing

# Inputs that are put into the worker's session (recorded follow-ups are kept, not sent).
DELIVERED_KINDS = ("message", "answer", "policy", "operator")


def enqueue(*effects: rules.EffectSpec) -> None:
    for effect in effects:
        outbox.enqueue(effect.kind, effect.key, effect.payload, channel=effect.channel)


def apply(row, plan: rules.Plan) -> None:
    """Save a plan's changes on the locked row and enqueue its effects."""
    if plan.changes:
        for name, value in plan.changes.items():
            setattr(row, name, value)
        row.save(update_fields=list(plan.changes))
        _revoke_if_run_ended(row, plan.changes)
    enqueue(*plan.effects)


def _revoke_if_run_ended(row, changes: dict) -> None:
    """A run that ends takes its worker session's model-gateway credential with it, as it
    takes its assignment token (read.assignment_for_token answers only live runs): the
    runtime's next model request is refused. A new run launches the runtime again, with a
    new credential."""
    if not isinstance(row, Assignment) or changes.get("state") in (None, "dispatching",
                                                                   "running"):
        return
    session_id = Ticket.objects.filter(pk=row.ticket_id).values_list(
        "session_id", flat=True).first()
    if session_id is not None:
        model_credentials.revoke(session_id)


def save_changes(row, changes: dict | None) -> bool:
    if not changes:
        return False
    for name, value in changes.items():
        setattr(row, name, value)
    row.save(update_fields=list(changes))
    _revoke_if_run_ended(row, changes)
    return True


def live_assignment(ticket: Ticket) -> int | None:
    return (Assignment.objects.filter(LIVE_ASSIGNMENT, ticket=ticket).order_by("-pk")
            .values_list("pk", flat=True).first())


def view(ticket: Ticket) -> rules.TicketView:
    return rules.TicketView(id=ticket.pk, ended=ticket.ended_at is not None,
                            live_assignment=live_assignment(ticket))


def run_facts(ticket: Ticket) -> failures.RunFacts:
    runs = list(Assignment.objects.filter(ticket=ticket).order_by("-pk")
                .values_list("pk", "state")[:1])
    return failures.RunFacts(
        ticket=ticket.pk, ended=ticket.ended_at is not None,
        live_assignment=live_assignment(ticket),
        last_state=runs[0][1] if runs else None,
        attempts=Assignment.objects.filter(ticket=ticket).count(),
    )


def last_failure(ticket: Ticket) -> failures.Failure | None:
    run = Assignment.objects.filter(ticket=ticket).order_by("-pk").first()
    if run is None:
        return None
    return failures.last_failure(run.state, run.failure_code, run.failure_message,
                                 run.ended_at, run.end_reason)


def new_run(ticket: Ticket, attempt: int = 1) -> Assignment:
    """A new run of the ticket, dispatched through the outbox."""
    assignment = Assignment.objects.create(ticket=ticket, attempt=attempt)
    enqueue(*rules.open_plan(ticket.pk, assignment.pk).effects)
    return assignment


def resumable(ticket: Ticket) -> bool:
    """Revalidation before a run resumes the ticket (tickets/core/resume.py), in the
    resuming transaction with the ticket locked: a ticket whose source no longer stands
    ends with the reason, and its asker is told once (a refusal repeated before any new
    run tells nobody again)."""
    now = clock()
    key = resume.tell_key(ticket.assignments.count())
    outcome = resume.revalidate(
        source_standing(ticket), ended=ticket.ended_at is not None,
        end_reason_now=ticket.end_reason, told=messages.sent(ticket, key), now=now)
    if outcome.ok:
        return True
    save_changes(ticket, outcome.changes)
    if outcome.tell:
        messages.relay(ticket, key, outcome.tell, now)
    return False


def redispatch(ticket: Ticket, cause: failures.Cause) -> Assignment | None:
    """A failed run is dispatched again (same mandate, a new run) when the rule says so and
    the ticket may still resume (`resumable`); inputs shown as not delivered go back in
    line for the new run."""
    attempt = failures.redispatch(run_facts(ticket), cause)
    if attempt is None or not resumable(ticket):
        return None
    assignment = new_run(ticket, attempt=attempt)
    stranded = Input.objects.filter(ticket=ticket, delivered_at__isnull=True,
                                    failed_at__isnull=False, kind__in=DELIVERED_KINDS)
    for item in stranded:
        item.failed_at = None
        item.failure = ""
        item.save(update_fields=["failed_at", "failure"])
        enqueue(rules.deliver(item.pk, ticket.pk))
    return assignment


def deliver(ticket: Ticket, item: Input, *, person_first: bool) -> None:
    """Put a stored input in line for the worker's session (a person's input first starts
    a new run of a failed ticket, so the input finds its session)."""
    if person_first:
        redispatch(ticket, failures.Cause.INPUT)
    if ticket.ended_at is not None:  # it may not resume (`resumable`): nowhere to deliver
        save_changes(item, {"failed_at": ticket.ended_at, "failure": ticket.end_reason})
        return
    enqueue(rules.deliver(item.pk, ticket.pk))


def open_ticket(trigger: Trigger, title: str) -> Ticket:
    """Accept a locked trigger as work: the ticket, its immutable mandate, the subscription
    to its thread and the first run, dispatched through the outbox."""
    title = (title or "").strip()
    if not title:
        raise InvalidCommand("title must not be empty")
    if trigger.decision not in ("explicit", "inferred") or not trigger.strength:
        raise InvalidCommand(f"trigger {trigger.pk} was not admitted by the policy")
    if Subscription.objects.filter(thread=trigger.thread).exists():
        raise ThreadAlreadyBound(
            f"thread {trigger.thread} already belongs to a ticket; follow-ups flow there"
        )
    ticket = Ticket.objects.create(
        short_name=f"pending-{secrets.token_hex(8)}", title=title[:300], thread=trigger.thread,
        channel=_chat_channel_of(trigger),
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
            # the configured group a per-group row decides for (policy.gate.PLACED_SCOPES)
            **({"place": place} if (place := Facts.of(
                trigger.source.slug, trigger.source.kind, trigger).place) else {}),
        },
    )
    Subscription.objects.create(ticket=ticket, thread=trigger.thread)
    if trigger.disposition != "admitted":
        trigger.disposition = "admitted"
        trigger.save(update_fields=["disposition"])
    new_run(ticket)
    return ticket


def title_of(trigger: Trigger) -> str:
    return rules.title_of(trigger.thread.title, trigger.text, trigger.scope, trigger.actor)


def _chat_channel_of(trigger: Trigger) -> Channel | None:
    """A request that came from a chat (Lark, web chat) hears the result there."""
    if trigger.source.kind == "github":
        return None
    channel, _ = Channel.objects.get_or_create(
        source=trigger.source, address=trigger.thread.key,
        defaults={"kind": "chat", "name": trigger.thread.title[:200]},
    )
    return channel


def last_word(ticket: Ticket) -> datetime | None:
    """The executor's last word on this ticket (tickets.core.answers)."""
    reports = Report.objects.filter(ticket=ticket).values_list("status", "created_at")
    runs = Assignment.objects.filter(ticket=ticket).values_list("ended_at", "last_turn_at")
    return answers.last_word(reports, (at for pair in runs for at in pair))


def end_if_due(ticket: Ticket, now: datetime) -> None:
    """The ticket ends when the rule says so (tickets.core.routing.end_reason), with one
    notice of its result."""
    if ticket.ended_at is not None:
        return
    pr_final = ticket.pr_state in ("merged", "closed")
    issue_closed = not pr_final and Thread.objects.filter(
        pk=ticket.thread_id, meta__issue_state="closed").exists()
    if not pr_final and not issue_closed:
        return
    in_flight = Assignment.objects.filter(ticket=ticket, state="dispatching").exists()
    # A person's message on the thread is owed an answer (operators' inputs are not).
    word = last_word(ticket)
    latest = (Input.objects.filter(ticket=ticket, is_human=True, kind="message")
              .order_by("-created_at").values_list("created_at", flat=True).first())
    reason = end_reason(EndFacts(
        pr_final, in_flight, answers.spoke_after(latest, word), issue_closed=issue_closed,
        pr_open=ticket.pr_state == "open", merged=ticket.pr_state == "merged",
    ))
    if reason is None:
        return
    ticket.ended_at = now
    ticket.end_reason = reason
    ticket.save(update_fields=["ended_at", "end_reason"])
    messages.notice_result(ticket, now)
