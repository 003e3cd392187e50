"""The one module of lock querysets. Locks are taken in pk order so two commands never
deadlock; `no_key` lets foreign-key inserts of other rows proceed meanwhile."""

from __future__ import annotations

from intake.models import Trigger
from tickets.core.errors import NotFound
from tickets.models import AgentSettings, Assignment, Input, Ticket


def _for_update(queryset):
    # of=("self",): joined rows (a trigger's source and thread) are read, not locked.
    return queryset.select_for_update(no_key=True, of=("self",)).order_by("pk")


def agent_settings() -> AgentSettings:
    """The one settings row (made if missing), locked before any ticket: a command that
    takes both takes it first."""
    AgentSettings.current()
    return _for_update(AgentSettings.objects.filter(pk=1)).get()


def ticket(ticket_id: int) -> Ticket:
    found = _for_update(Ticket.objects.filter(pk=ticket_id)).first()
    if found is None:
        raise NotFound(f"ticket {ticket_id} does not exist")
    return found


def ticket_of_assignment(assignment_id: int) -> tuple[Ticket, Assignment]:
    ticket_id = (
        Assignment.objects.filter(pk=assignment_id).values_list("ticket_id", flat=True).first()
    )
    if ticket_id is None:
        raise NotFound(f"assignment {assignment_id} does not exist")
    locked = ticket(ticket_id)
    return locked, Assignment.objects.get(pk=assignment_id)


def ticket_of_input(input_id: int) -> tuple[Ticket, Input]:
    ticket_id = Input.objects.filter(pk=input_id).values_list("ticket_id", flat=True).first()
    if ticket_id is None:
        raise NotFound(f"input {input_id} does not exist")
    locked = ticket(ticket_id)
    return locked, Input.objects.get(pk=input_id)


def trigger(trigger_id: int) -> Trigger:
    found = (
        _for_update(Trigger.objects.filter(pk=trigger_id))
        .select_related("source", "thread")
        .first()
    )
    if found is None:
        raise NotFound(f"trigger {trigger_id} does not exist")
    return found
