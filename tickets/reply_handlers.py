"""Outbox handlers that speak through a source: relays to a ticket's thread and notices to
a channel. The effect id is the message id, so a replay after a crash (send done, row not
yet settled) sends nothing twice: GitHub comments carry it as a hidden marker, Lark
messages as `uuid`, Lark document comment replies as a short trailing tag, web chat stores
it unique. tickets/wiring.py registers them."""

from __future__ import annotations

import logging

from effects import outbox
from intake.models import Channel, Thread
from intake.send import send
from intake.sources.base import SendResult
from tickets.actions import guards as guard_actions

log = logging.getLogger(__name__)


class SendFailed(RuntimeError):
    """The platform answered "not now": a failed attempt, retried with backoff."""


def _settle(result: SendResult, effect_id: int) -> None:
    if result == SendResult.RETRY:
        raise SendFailed(f"effect {effect_id}: the source asked to retry later")
    if result == SendResult.GONE:
        log.warning("effect %s: delivery is permanently impossible; dropped", effect_id)


def _wait_if_held(effect_id: int, payload: dict) -> None:
    """A message the hourly cap holds waits in its channel until the hour rolls over (not
    a failure); Retry or a raised cap makes it due at once."""
    wait = guard_actions.message_held(effect_id=effect_id, ticket_id=payload.get("ticket"))
    if wait is not None:
        raise outbox.Later(wait, "held by the hourly message cap")


def relay(effect_id: int, payload: dict) -> None:
    _wait_if_held(effect_id, payload)
    thread = Thread.objects.select_related("source").get(pk=payload["thread"])
    message_id = payload.get("message_id") or f"effect-{effect_id}"
    result = send(thread.source, message_id=message_id, thread=thread.key,
                         text=payload["text"])
    _settle(result, effect_id)


def notice(effect_id: int, payload: dict) -> None:
    _wait_if_held(effect_id, payload)
    channel = Channel.objects.select_related("source").get(pk=payload["channel"])
    result = send(channel.source, message_id=f"effect-{effect_id}",
                         thread=channel.address, text=payload["text"])
    _settle(result, effect_id)
