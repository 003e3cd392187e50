"""Messages on a ticket's behalf (relays to its thread, notices to a channel): out now, or
held by the hourly message cap and released in order. Called with the ticket's lock held,
inside the action's transaction.

Every message is an outbox row (relay or notice, ordered in its channel) from the moment it
is decided; `TicketMessage` is the ledger the cap counts and the ticket shows. A held one's
row is due when the hour rolls over, and holds its channel until then (nothing newer
overtakes it); its handler asks `guards.message_held` whether it fits in the hour by now.
Retry and a raised cap release at once (`release`)."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta

from django.db import transaction

from amux_common import metrics
from effects import outbox
from intake.models import Channel, Source
from tickets import guarding
from tickets.core import guards, notices
from tickets.models import Ticket, TicketMessage


def relay(ticket: Ticket, key: str, text: str, now: datetime, message_id: str = "") -> None:
    thread = ticket.thread
    payload = {"ticket": ticket.pk, "thread": thread.pk, "text": text}
    if message_id:  # else the effect's id is the message's
        payload["message_id"] = message_id
    send(ticket, "relay", f"ticket:{ticket.pk}:{key}", payload,
         channel=outbox.channel_key(thread.source.slug, thread.key), now=now)


def sent(ticket: Ticket, key: str) -> bool:
    """Whether a message with this key (as given to `relay`) was sent or held already."""
    return TicketMessage.objects.filter(ticket=ticket, key=f"ticket:{ticket.pk}:{key}").exists()


def notice_result(ticket: Ticket, now: datetime) -> None:
    """One notice of the final result where the request came from: the chat thread that
    asked, else the notice channel its source names; otherwise none (the PR shows it)."""
    channel = ticket.channel or _configured_notice_channel(ticket.thread.source)
    if channel is None:
        return
    text = notices.result_text(ticket.title, ticket.end_reason, ticket.pr_state,
                               ticket.thread.url, ticket.pr_url)
    send(ticket, "notice", f"ticket:{ticket.pk}:end:{ticket.assignments.count()}",
         {"ticket": ticket.pk, "channel": channel.pk, "text": text},
         channel=outbox.channel_key(channel.source.slug, channel.address), now=now)


def _configured_notice_channel(source: Source) -> Channel | None:
    target = notices.parse_notice_channel((source.config or {}).get("notice_channel"))
    if target is None:
        return None
    chat = Source.objects.filter(slug=target[0], kind__in=notices.CHAT_KINDS).first()
    if chat is None:
        return None  # the named chat source is gone: no notice rather than a wrong one
    channel, _ = Channel.objects.get_or_create(
        source=chat, address=target[1][:300], defaults={"kind": "chat"})
    return channel


def send(ticket: Ticket, kind: str, key: str, payload: dict, channel: str,
         now: datetime) -> None:
    """Out now, or held by the hourly message cap (kept, shown on the ticket, released in
    order by `release`)."""
    spend = guarding.spends([ticket], now)[ticket.pk]
    released = now if guards.may_send(guarding.caps(), spend) else None
    TicketMessage.objects.create(ticket=ticket, kind=kind, key=key, channel=channel,
                                 payload=payload, created_at=now, released_at=released)
    outbox.enqueue(kind, key, payload, channel=channel,
                   delay=0 if released is not None else next_hour_s(now))
    if released is None:
        transaction.on_commit(functools.partial(metrics.guard_blocked,
                                                guards.HOURLY_MESSAGES, "message"))


def next_hour_s(now: datetime) -> float:
    """Seconds until the hour rolls over (when a held message may fit again)."""
    return max(1.0, (guards.hour_start(now) + timedelta(hours=1) - now).total_seconds())


def release(ticket: Ticket, now: datetime, everything: bool = False,
            running: str = "") -> int:
    """Held messages that fit in this hour go out, oldest first (all of them on Retry):
    their rows are due now, keeping their places in their channels (`running`: the key of
    the row whose handler asks, which goes on by itself)."""
    spend = guarding.spends([ticket], now)[ticket.pk]
    count = spend.held if everything else guards.releasable(guarding.caps(), spend)
    if not count:
        return 0
    held = list(TicketMessage.objects.filter(ticket=ticket, released_at__isnull=True)
                .order_by("pk")[:count])
    for message in held:
        message.released_at = now
        message.save(update_fields=["released_at"])
        if message.key != running:
            outbox.enqueue(message.kind, message.key, message.payload,
                           channel=message.channel)
    return len(held)
