"""What the team's main session does (its tools route, dismiss and stop), and the code
route taken in its place when it cannot be started. The rules: tickets/core/main_session.py.

The main session is untrusted like any agent: every argument is checked here, whatever
its tool's schema said. Routing opens the ticket through the same common.open_ticket as
amux's own routing, so the ticket, mandate, subscription and first run are the same
whichever router decided; only `routed_by` and the routing note tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from amux_common.clock import now as clock
from effects.models import Effect, EffectKind, EffectState
from intake.models import Trigger
from tickets import locks
from tickets.actions import common
from tickets.actions.routing import route_locked
from tickets.core import main_session as rules
from tickets.core import rules as ticket_rules
from tickets.models import Subscription, Ticket


@dataclass(frozen=True)
class Routed:
    trigger: int
    disposition: str
    ticket: int | None


def route(*, trigger_id, note) -> Routed:
    """Command (the main session's `route`): turn an explicit request awaiting routing into
    a ticket with the routing note. A note over 30 words, a trigger that does not await
    routing, a message a ticket's executor owns: refused, nothing written. If a ticket took
    the thread meanwhile, the message goes to its executor as a follow-up (path B)."""
    trigger_id = rules.check_id(trigger_id, "trigger")
    note = rules.check_note(note)
    with transaction.atomic(durable=True):
        trigger = locks.trigger(trigger_id)
        owner = _owner(trigger)
        rules.check_routable(rules.TriggerFacts(trigger.pk, trigger.disposition,
                                                trigger.decision, owner))
        if Subscription.objects.filter(thread_id=trigger.thread_id).exists():
            return _by_code(trigger)  # bound meanwhile: a follow-up of that ticket
        ticket = common.open_ticket(trigger, common.title_of(trigger))
        common.save_changes(ticket, {"routed_by": rules.Router.MAIN, "routing_note": note})
        return Routed(trigger.pk, trigger.disposition, ticket.pk)


def dismiss(*, trigger_id, reason) -> Routed:
    """Command (the main session's `dismiss`): take no action on a request awaiting
    routing; the one-line reason is kept for the operators, nothing is posted."""
    trigger_id = rules.check_id(trigger_id, "trigger")
    reason = rules.check_reason(reason)
    with transaction.atomic(durable=True):
        trigger = locks.trigger(trigger_id)
        rules.check_routable(rules.TriggerFacts(trigger.pk, trigger.disposition,
                                                trigger.decision, _owner(trigger)))
        common.save_changes(trigger, {"disposition": rules.DISMISSED,
                                      "meta": {**trigger.meta, "dismissed": reason}})
        return Routed(trigger.pk, trigger.disposition, None)


def stop(*, ticket_id, reason) -> Ticket:
    """Command (the main session's `stop`): end a live ticket; its running worker is told
    to stop (the same plan as an operator's stop). The reason is kept on the ticket."""
    ticket_id = rules.check_id(ticket_id, "ticket")
    reason = rules.check_reason(reason)
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        common.apply(ticket, ticket_rules.stop(common.view(ticket), by="main", now=clock()))
        common.save_changes(ticket, {"stop_note": f"main session: {reason}"})
    return ticket


def route_by_code(*, trigger_id: int) -> Routed:
    """Fact: the main session cannot be reached (no runtime configured any more, or the
    session layer refused to start it). A request still awaiting routing takes amux's own
    route, so nothing that was accepted is lost."""
    with transaction.atomic(durable=True):
        trigger = locks.trigger(trigger_id)
        if trigger.disposition != rules.AWAITING:
            return Routed(trigger.pk, trigger.disposition, None)
        return _by_code(trigger)


UNREACHED_BATCH = 100


def unreached_routed_by_code() -> list[Routed]:
    """Sweep (beat, every minute): a request whose notice to the main session became a
    dead letter, with no newer one in line, never reached a router; amux routes it by code,
    so an accepted request does not wait in `routing` for an operator to notice."""
    keys = Effect.objects.filter(kind=EffectKind.MAIN_NOTIFY, key__startswith="trigger:")
    pending = keys.filter(state=EffectState.PENDING).values("key")
    dead = (keys.filter(state=EffectState.DEAD).exclude(key__in=pending)
            .values_list("key", flat=True).distinct())
    ids = [int(key.rpartition(":")[2]) for key in dead if key.rpartition(":")[2].isdigit()]
    stuck = (Trigger.objects.filter(pk__in=ids, disposition=rules.AWAITING)
             .order_by("pk").values_list("pk", flat=True)[:UNREACHED_BATCH])
    return [route_by_code(trigger_id=trigger_id) for trigger_id in stuck]


def _by_code(trigger: Trigger) -> Routed:
    trigger.disposition = ""
    route_locked(trigger, main=False)
    ticket = Subscription.objects.filter(thread_id=trigger.thread_id).values_list(
        "ticket_id", flat=True).first()
    return Routed(trigger.pk, trigger.disposition, ticket)


def _owner(trigger: Trigger) -> int | None:
    """The live ticket whose executor owns messages on this trigger's thread."""
    return Subscription.objects.filter(
        thread_id=trigger.thread_id, ticket__ended_at__isnull=True).values_list(
        "ticket_id", flat=True).first()

