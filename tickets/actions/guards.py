"""What the caps (tickets/core/guards.py) hold and release: held inputs, held dispatches
and held messages. Each waits as its own outbox row, due again when its cap resets, so
nothing sweeps for them; a raised cap (`recheck`) and Retry release them at once."""

from __future__ import annotations

import functools

from django.db import transaction

from amux_common import metrics
from amux_common.clock import now as clock
from effects.models import Effect
from tickets import guarding, locks
from tickets.actions import common
from tickets.actions import messages as outgoing
from tickets.core import guards, rules
from tickets.models import Assignment, Input, Ticket, TicketMessage


def holding() -> set[int]:
    """The live tickets with something held (a message, an input, a dispatch)."""
    return (
        set(TicketMessage.objects.filter(released_at__isnull=True)
            .values_list("ticket_id", flat=True))
        | set(Input.objects.exclude(held="").filter(delivered_at__isnull=True,
                                                    ticket__ended_at__isnull=True)
              .values_list("ticket_id", flat=True))
        | set(Assignment.objects.filter(state="dispatching", ticket__ended_at__isnull=True)
              .exclude(held="").values_list("ticket_id", flat=True))
    )


def recheck(ticket: Ticket) -> bool:
    """On one locked ticket, what no cap blocks any more goes now; True if anything did."""
    now = clock()
    sent = outgoing.release(ticket, now)
    found = guarding.reached([ticket], now)[ticket.pk]
    return bool((found is None and release_held_work(ticket)) or sent)


def message_held(*, effect_id: int, ticket_id: int | None) -> float | None:
    """Fact: a relay or notice (outbox row `effect_id`) is about to go out. A message the
    hourly cap held goes once it fits in the hour, the held ones of its ticket oldest
    first (released now, the others' rows made due); None when it may go, else the seconds
    until the hour rolls over. A message that is not a ticket's always goes."""
    held = TicketMessage.objects.filter(ticket_id=ticket_id, released_at__isnull=True)
    if not ticket_id or not held.exists():  # the usual case: one indexed look
        return None
    key = Effect.objects.filter(pk=effect_id).values_list("key", flat=True).first()
    if key is None or not held.filter(key=key).exists():
        return None
    with transaction.atomic(durable=True):
        ticket = locks.ticket(ticket_id)
        now = clock()
        outgoing.release(ticket, now, running=key)
        if held.filter(key=key).exists():
            return outgoing.next_hour_s(now)
    return None


def release_held_work(ticket: Ticket) -> bool:
    """Held inputs and the held dispatch are made due now; their handlers look again."""
    items = list(Input.objects.filter(ticket=ticket, delivered_at__isnull=True).exclude(held=""))
    runs = list(Assignment.objects.filter(ticket=ticket, state="dispatching").exclude(held=""))
    common.enqueue(*(rules.deliver(item.pk, ticket.pk) for item in items),
                   *(rules.dispatch(run.pk, ticket.pk) for run in runs))
    return bool(items or runs)


def input_held(*, input_id: int) -> guards.Reached | None:
    """Fact: a `deliver` effect is about to put an input into the worker's session. While
    a cap blocks the ticket the input is held (it says why) and the cap is answered;
    otherwise a hold is lifted and None answered."""
    with transaction.atomic(durable=True):
        ticket, item = locks.ticket_of_input(input_id)
        return note_hold(ticket, item)


def note_hold(ticket: Ticket, row: Input | Assignment) -> guards.Reached | None:
    """Record on an input or a run why a cap holds it (or that nothing does any more); a
    blocked ticket gets nothing new, whichever cap blocks it."""
    found = guarding.reached([ticket], clock())[ticket.pk] if ticket.ended_at is None else None
    text = (found.text if found else "")[:200]
    if found is not None and not row.held:  # newly held: counted once, not per retry
        what = "input" if isinstance(row, Input) else "run"
        transaction.on_commit(functools.partial(metrics.guard_blocked, found.cap, what))
    if row.held != text:
        row.held = text
        row.save(update_fields=["held"])
    return found
