"""The facts the guards decide on (tickets/core/guards.py), read in a few queries.

Tokens come from the sessions app's own records: a ticket's spend is its worker session's
cumulative figure as the runtime reported it (or, for a runtime that reports none, the sum
of its daily records); a day's spend is every session's daily record of that day. A session
whose model requests go through amux's model gateway has its daily records counted there,
per request, from the provider's answers: its ticket spend is their sum (the runtime's own
figure is about the same requests and is not added).

`model_request_refusal` is what the model gateway asks before each model request of a
session (registered in tickets/wiring.py): the cap a ticket's worker session has reached.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Sum

from amux_common import metrics
from amux_common.clock import now as clock
from sessions.models import Session, UsageDay
from sessions.usage import cumulative_total
from tickets.core import guards
from tickets.models import AgentSettings, Ticket, TicketMessage


def caps() -> guards.Caps:
    s = AgentSettings.current()
    return guards.Caps(ticket_tokens=s.ticket_token_cap, daily_tokens=s.daily_token_cap,
                       messages_per_hour=s.messages_per_ticket_hour)


def day_tokens(now: datetime) -> int:
    day = guards.day_start(now).date()
    return UsageDay.objects.filter(day=day).aggregate(n=Sum("tokens"))["n"] or 0


def spends(tickets: Iterable[Ticket], now: datetime) -> dict[int, guards.Spend]:
    tickets = list(tickets)
    ids = [t.pk for t in tickets]
    sessions = {t.session_id for t in tickets if t.session_id}
    rows = Session.objects.filter(pk__in=sessions).values_list("pk", "usage", "usage_metered")
    # a metered session's tokens are the gateway's per-request counts (its daily records)
    reported = {pk: None if metered else cumulative_total(usage)
                for pk, usage, metered in rows}
    summed = dict(UsageDay.objects.filter(session_id__in=sessions).values("session_id")
                  .annotate(n=Sum("tokens")).values_list("session_id", "n"))
    held = dict(TicketMessage.objects.filter(ticket_id__in=ids, released_at__isnull=True)
                .values("ticket_id").annotate(n=Count("id")).values_list("ticket_id", "n"))
    hour = guards.hour_start(now)
    sent_rows = TicketMessage.objects.filter(ticket_id__in=ids, released_at__gte=hour) \
        .values_list("ticket_id", "released_at")
    waivers = {t.pk: guards.Waiver.from_dict(t.guard_waiver) for t in tickets}
    sent: dict[int, int] = {}
    for ticket_id, at in sent_rows:
        waived = waivers[ticket_id].messages_at
        if waived is None or at > waived:  # what Retry released is not counted again
            sent[ticket_id] = sent.get(ticket_id, 0) + 1
    today = day_tokens(now)
    out = {}
    for t in tickets:
        own = reported.get(t.session_id)
        out[t.pk] = guards.Spend(
            ticket_tokens=(own if own is not None else summed.get(t.session_id, 0)) or 0,
            day_tokens=today, sent_this_hour=sent.get(t.pk, 0), held=held.get(t.pk, 0))
    return out


def reached(tickets: Iterable[Ticket], now: datetime) -> dict[int, guards.Reached | None]:
    """The cap each ticket has reached now (None: none); ended tickets are never blocked."""
    tickets = list(tickets)
    live = [t for t in tickets if t.ended_at is None]
    limits = caps()
    spend = spends(live, now) if live else {}
    out: dict[int, guards.Reached | None] = {t.pk: None for t in tickets}
    for t in live:
        out[t.pk] = guards.reached(limits, spend[t.pk], now,
                                   guards.Waiver.from_dict(t.guard_waiver))
    return out


def model_request_refusal(session_id: int, ticket_id: int) -> str | None:
    """Why a model request of `session_id`, whose live ticket is `ticket_id` (what
    `MODEL_REQUEST_PROBE` found), may not go out now: the cap the ticket has reached (its
    stage shows it blocked with the same text), or None."""
    ticket = Ticket.objects.filter(pk=ticket_id).first()
    if ticket is None:
        return None
    found = reached([ticket], clock())[ticket.pk]
    if found is None:
        return None
    metrics.guard_blocked(found.cap, "model_request")
    return f"amux: {found.text}"


# the session's live ticket, read with the grant of each model request (sessions.hooks):
# NULL for most sessions, which then pay nothing more
MODEL_REQUEST_PROBE = (f"SELECT id FROM {Ticket._meta.db_table} WHERE session_id = "
                       f"{{session}} AND ended_at IS NULL ORDER BY id LIMIT 1")
