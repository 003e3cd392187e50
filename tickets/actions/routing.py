"""Where a trigger goes once the gate has decided (seed 002: two fates of a message), and
the evals that triage inferred candidates. The rules: tickets/core/routing.py and
tickets/core/evals.py."""

from __future__ import annotations

from django.db import transaction

from amux_common.clock import now as clock
from intake.models import Trigger
from prompts_app.contract import clip_routing_note
from tickets import locks, main_config
from tickets.actions import common
from tickets.core import evals
from tickets.core import main_session as main_rules
from tickets.core.errors import NotFound
from tickets.core.routing import Route, RoutingFacts, disposition, route
from tickets.models import Eval, Input, Subscription, Ticket
from tickets.policy_hooks import acceptance_mode, current_version


def route_trigger(*, trigger_id: int) -> str:
    """Fact: a trigger was recorded and the gate decided. Route it: follow-up, revival,
    a new ticket, an eval, or nothing. Returns the route taken (the trigger's disposition).
    Intake routes in its own transaction (route_new); this is for triggers decided
    elsewhere."""
    with transaction.atomic(durable=True):
        trigger = locks.trigger(trigger_id)
        if trigger.disposition:
            return trigger.disposition  # routed already: a redelivery changes nothing
        return route_locked(trigger)


def route_new(trigger: Trigger, acceptance: str | None) -> str:
    """Intake's new trigger (unsaved, with the gate's decision), in intake's transaction:
    the route is chosen before the insert so the trigger is written once with its
    disposition, then taken. Answers the disposition."""
    taken, ticket = _route_of(trigger, acceptance)
    main = _main_for(taken)
    trigger.disposition = (main_rules.AWAITING if main_rules.hands_to_main(taken, main)
                           else disposition(taken))
    trigger.save(force_insert=True)
    _take(trigger, taken, ticket, main=main)
    return trigger.disposition


def route_locked(trigger: Trigger, acceptance: str | None = None, *,
                 main: bool | None = None) -> str:
    """Route a locked trigger that has no disposition yet; answers its disposition.
    `main=False` routes by code even with a main session configured (its fallback)."""
    taken, ticket = _route_of(trigger, acceptance)
    _take(trigger, taken, ticket, main=main)
    return trigger.disposition


def _route_of(trigger: Trigger, acceptance: str | None) -> tuple[Route, Ticket | None]:
    """Which route a trigger takes (its subscribed ticket locked)."""
    subscription = Subscription.objects.filter(thread_id=trigger.thread_id).first()
    ticket = locks.ticket(subscription.ticket_id) if subscription else None
    taken = route(
        RoutingFacts(
            decision=trigger.decision or "ignore",
            acceptance=acceptance or acceptance_mode(),
            is_human=trigger.is_human and not trigger.is_bot,
            own_message=bool(trigger.meta.get("own_message")),
            subscribed_ticket=ticket.pk if ticket else None,
            ticket_ended=bool(ticket and ticket.ended_at),
        )
    )
    return taken, ticket


def _take(trigger: Trigger, taken: Route, ticket: Ticket | None, *,
          main: bool | None = None) -> None:
    """Do what the route says, and record it as the trigger's disposition (a trigger
    inserted with it already set is not written again). With a main session an explicit
    request waits for it (it routes through the same open_ticket), and it hears of a
    person's follow-up."""
    main = _main_for(taken) if main is None else main
    if main_rules.hands_to_main(taken, main):
        if trigger.disposition != main_rules.AWAITING:
            trigger.disposition = main_rules.AWAITING
            trigger.save(update_fields=["disposition"])
        common.enqueue(main_rules.notify(trigger.pk, "request"))
        return
    if main_rules.notifies_main(taken, main, trigger.is_human and not trigger.is_bot):
        common.enqueue(main_rules.notify(trigger.pk, "follow_up", ticket.pk))
    if taken in (Route.FOLLOW_UP, Route.REVIVE, Route.RECORD):
        if taken is Route.REVIVE:
            _revive(ticket)
        _input_from_trigger(ticket, trigger, deliver=taken is not Route.RECORD)
    elif taken is Route.EVALUATE:
        start_eval(trigger)
    if taken is Route.OPEN:
        routed = common.open_ticket(trigger, common.title_of(trigger))
        common.save_changes(routed, {"routed_by": main_rules.Router.CODE})
    elif trigger.disposition != disposition(taken):
        trigger.disposition = disposition(taken)
        trigger.save(update_fields=["disposition"])


def _main_for(taken: Route) -> bool:
    """Whether the team's main session takes part in this route (read only when it could)."""
    return taken in (Route.OPEN, Route.FOLLOW_UP, Route.REVIVE) and main_config.configured()


def _input_from_trigger(ticket: Ticket, trigger: Trigger, *, deliver: bool) -> Input:
    item = Input.objects.create(
        ticket=ticket,
        kind="message",
        text=trigger.text,
        author=trigger.actor,
        is_human=trigger.is_human and not trigger.is_bot,
        trigger=trigger,
    )
    if deliver:
        common.deliver(ticket, item, person_first=item.is_human)
    return item


def _revive(ticket: Ticket) -> None:
    """Same mandate, a new run: no new eval, no new authority — and only when the ticket
    may still resume (`common.resumable`, which otherwise keeps it ended, saying why)."""
    if not common.resumable(ticket):
        return
    common.save_changes(ticket, {"ended_at": None, "end_reason": ""})
    common.new_run(ticket, attempt=ticket.assignments.count() + 1)


def start_eval(trigger: Trigger, policy_version: str = "") -> Eval:
    evaluation = Eval.objects.create(
        trigger=trigger,
        policy_version=policy_version or trigger.policy_version or current_version(),
    )
    common.enqueue(evals.assess(evaluation.pk))
    return evaluation


def eval_finished(*, eval_id: int, result: str, note: str = "") -> str:
    """Fact: triage of an inferred candidate ended. A discarded eval's result is dropped."""
    evals.check_result(result)
    with transaction.atomic(durable=True):
        evaluation = (
            Eval.objects.select_for_update(no_key=True).select_related("trigger")
            .filter(pk=eval_id).first()
        )
        if evaluation is None:
            raise NotFound(f"eval {eval_id} does not exist")
        if evaluation.state != "running":
            return evaluation.state
        common.save_changes(evaluation, {"state": "done", "result": result,
                                         "note": clip_routing_note(note),
                                         "finished_at": clock()})
        trigger = locks.trigger(evaluation.trigger_id)
        outcome = evals.finished(
            result, acceptance=acceptance_mode(),
            thread_bound=Subscription.objects.filter(thread=trigger.thread).exists())
        if outcome.open_ticket:
            common.open_ticket(trigger, common.title_of(trigger))
        else:
            common.save_changes(trigger, {"disposition": outcome.disposition})
        return trigger.disposition
