"""Acknowledging the events of a source with a cursor (a Lark document's comments, a Lark
chat's history), in the order seed 003 sets: capture and deduplicate → processing → the
durable effect (the delivery processed into a trigger and its route, or ignored with a
content-free reason) → the optional reply through the source (the `intake.ack` effect,
a document comment's receipt) → the reply read back from the provider → only then ACK,
and the cursor passes the event.

A consumer that acknowledges events itself (a goal agent's async inbox, goals/) holds
the event once its trigger is routed there (state `held`): the cursor then waits for that
consumer's ACK (`consumer_acknowledged`), which comes only after the inbox settle's durable
effect and, when a reply is due, the reply read back from the provider.

Each captured event is one EventAck row. The committed cursor passes an event only when it
and every event before it are acknowledged, so a crash at any step leaves the cursor before
it and the next poll or the effect's retry takes it up again: capture dedupes on the row
(and the delivery id), the reply on its marker, the ACK on the row's state.
"""

from __future__ import annotations

import functools
import logging

from django.db import IntegrityError, transaction

from amux_common.clock import now as clock
from amux_common.integrity import violates
from effects import outbox
from intake import consumers, source_actions
from intake.models import Delivery, EventAck, Source, Thread, Trigger
from intake.receive import accept
from intake.send import send
from intake.sources import ReadsRepliesBack, plugin
from intake.sources.base import Envelope, Message, SendResult
from intake.sources.lark import CATCHUP_SECONDS, DocCursor

log = logging.getLogger(__name__)

ACK_EFFECT = "intake.ack"


class ReplyNotReadBack(RuntimeError):
    """The source said the reply was sent but the provider does not show it (yet)."""


def _position(env: Envelope) -> tuple[str, int, str]:
    event = env.payload.get("event") or {}
    header = env.payload.get("header") or {}
    message = event.get("message") or {}
    if message.get("message_id"):  # a chat message: its id, ordered by its time in ms
        ms = int(str(message.get("create_time") or header.get("create_time") or "0"))
        return str(message["message_id"]), ms // 1000, f"{ms:015d} {message['message_id']}"
    item = str(event.get("reply_id") or event.get("comment_id") or env.delivery_id)
    at = int(str(header.get("create_time") or "0")) // 1000
    return item, at, f"{event.get('comment_id') or ''} {event.get('reply_id') or ''}"


def capture(source: Source, cursor: str, env: Envelope, how: str = "doc_comments") -> bool:
    """Capture one polled event: its row (deduplicated on the provider's id), then its
    delivery stored and processed — the durable effect — unless stored before. The cursor
    does not move. `how` names the poll in the delivery's headers. Answers whether the
    event was new."""
    new = mark(source, cursor, env)
    if not Delivery.objects.filter(source=source, delivery_id=env.delivery_id).exists():
        # A failing plugin or gate leaves it stored raw for the sweep: still captured.
        # A message the webhook brought first is stored as a duplicate of its trigger.
        accept(source, env, {"x-amux-poll": how})
    return new


def mark(source: Source, cursor: str, env: Envelope) -> bool:
    """The first step of a capture: the event's row, once per provider id (False when it
    was there already)."""
    item, at, order = _position(env)
    try:
        with transaction.atomic(durable=True):
            EventAck.objects.create(source=source, cursor=cursor, item=item, at=at,
                                    order=order, delivery_id=env.delivery_id)
    except IntegrityError as exc:
        if not violates(exc, "event_ack_unique_item"):
            raise
        return False
    return True


def advance(source: Source, cursor: str) -> None:
    """Take each unacknowledged event of `cursor` as far as it can go now, then commit the
    cursor past the events acknowledged in order."""
    for pk in (EventAck.objects.filter(source=source, cursor=cursor)
               .exclude(state=EventAck.State.ACKED).order_by("at", "order")
               .values_list("pk", flat=True)):
        _settle(pk)
    commit_cursor(source.pk, cursor)


def _settle(pk: int) -> None:
    """An event whose durable effect is recorded: acknowledged with no reply when none is
    due, else its reply handed to the outbox (which acknowledges it after the readback)."""
    with transaction.atomic(durable=True):
        row = EventAck.objects.select_for_update().select_related("source").get(pk=pk)
        if row.state not in (EventAck.State.CAPTURED, EventAck.State.HELD):
            return
        delivery = Delivery.objects.filter(source_id=row.source_id,
                                           delivery_id=row.delivery_id).first()
        if delivery is None or delivery.processed_at is None:
            return  # the durable effect is not recorded yet: nothing may pass it
        held = _held(delivery)
        if held:  # its consumer acknowledged it (and the cursor may not have moved yet)
            _acked(row, held[:40])
            return
        if held == "":  # its consumer holds it: only that consumer's ACK passes it
            if row.state != EventAck.State.HELD:
                row.state = EventAck.State.HELD
                row.save(update_fields=["state"])
            return
        # the receipt reply is a document comment's; a chat message's answer is its
        # consumer's business
        receipt = (row.source.config.get("comment_receipt") or "").strip() if (
            row.cursor.startswith("doc:")) else ""
        replies = isinstance(plugin(row.source.kind, row.source.config), ReadsRepliesBack)
        if delivery.outcome == "admitted" and receipt and replies:
            row.state = EventAck.State.REPLYING
            row.save(update_fields=["state"])
            outbox.enqueue(ACK_EFFECT, f"ack:{row.pk}", {"ack": row.pk})
            return
        _acked(row, "no_response" if delivery.outcome == "admitted"
               else (delivery.reason or delivery.outcome or "no_response")[:40])


def _held(delivery: Delivery) -> str | None:
    """Whether the consumer of the delivery's trigger holds it (consumers.acknowledgement)."""
    if delivery.trigger_id is None:
        return None
    trigger = Trigger.objects.filter(pk=delivery.trigger_id).first()
    return consumers.acknowledgement(trigger) if trigger is not None else None


def consumer_acknowledged(source_id: int, external_id: str, outcome: str,
                          reply_ref: str = "") -> int:
    """The consumer holding a trigger acknowledged it (in the consumer's own transaction,
    after its durable effect and verified reply): its held events are acknowledged with it,
    and after the commit each one's cursor moves past what is acknowledged in order. A
    second call changes nothing. A crash before the cursor moves is repaired by the next
    poll (`advance` commits the cursor). Answers how many events were acknowledged."""
    deliveries = Delivery.objects.filter(
        source_id=source_id,
        trigger__in=Trigger.objects.filter(source_id=source_id, external_id=external_id[:300]),
    ).values("delivery_id")
    rows = list(EventAck.objects.select_for_update()
                .filter(source_id=source_id, state=EventAck.State.HELD,
                        delivery_id__in=deliveries).order_by("pk"))
    for row in rows:
        _acked(row, outcome[:40] or "no_response", reply_ref)
    for cursor in sorted({row.cursor for row in rows}):
        transaction.on_commit(functools.partial(commit_cursor, source_id, cursor))
    return len(rows)


def _acked(row: EventAck, outcome: str, reply_ref: str = "") -> None:
    row.state, row.outcome, row.reply_ref = EventAck.State.ACKED, outcome, reply_ref[:200]
    row.acked_at = clock()
    row.save(update_fields=["state", "outcome", "reply_ref", "acked_at"])


def commit_cursor(source_id: int, cursor: str) -> None:
    """Move `cursor` past the events acknowledged in order, never past one that is not;
    acknowledged rows a week behind it are dropped."""
    with transaction.atomic(durable=True):
        source = Source.objects.select_for_update().filter(pk=source_id).first()
        if source is None:
            return
        stored = ((source.health or {}).get("cursors") or {}).get(cursor) or {}
        if not stored.get("value"):
            return
        start = cur = DocCursor.load(stored)
        rows = (EventAck.objects.filter(source_id=source_id, cursor=cursor,
                                        at__gte=cur.time).order_by("at", "order")
                .values_list("item", "at", "state"))
        passed = []
        for item, at, state in rows:
            if at == cur.time and item in cur.seen:
                continue
            if state != EventAck.State.ACKED:
                break
            passed.append((item, at))
        cur = start.passing(passed)
        if cur != start:
            source_actions.move_cursor(source_id, cursor, cur.value(),
                                       {**{k: v for k, v in stored.items()
                                           if k not in ("value", "seen", "at")},
                                        "seen": list(cur.seen)})
        EventAck.objects.filter(source_id=source_id, cursor=cursor,
                                state=EventAck.State.ACKED,
                                at__lt=cur.time - CATCHUP_SECONDS).delete()


def reply_and_ack(effect_id: int, payload: dict) -> None:
    """The `intake.ack` effect: reply on the event's thread through its source (once per
    event: the reply's marker), read the reply back from the provider, then ACK and move
    the cursor. A reply the provider does not show raises, so the effect is retried; an
    event already acknowledged changes nothing."""
    row = EventAck.objects.select_related("source").filter(pk=payload.get("ack")).first()
    if row is None or row.state == EventAck.State.ACKED:
        return
    source = row.source
    delivery = Delivery.objects.get(source=source, delivery_id=row.delivery_id)
    thread = delivery.mailbox.partition(":")[2]
    text = (source.config.get("comment_receipt") or "").strip()
    message_id = f"ack-{row.pk}"
    result = send(source, message_id=message_id, thread=thread, text=text)
    if result == SendResult.RETRY:
        raise ReplyNotReadBack(f"ack {row.pk}: the source asked to retry the reply later")
    ref = ""
    if result == SendResult.SENT:
        meta = Thread.objects.filter(source=source, key=thread).values_list("meta", flat=True)
        plug = plugin(source.kind, source.config, source.secrets)
        ref = plug.read_back(Message(message_id, thread, text, meta=dict(meta.first() or {})))
        if not ref:
            raise ReplyNotReadBack(f"ack {row.pk}: the reply is not shown by the provider")
    with transaction.atomic(durable=True):
        row = EventAck.objects.select_for_update().get(pk=row.pk)
        if row.state == EventAck.State.ACKED:
            return
        # A reply that can never land (comment deleted) is recorded as such, content-free.
        _acked(row, "replied" if ref else "reply_gone", ref)
    commit_cursor(source.pk, row.cursor)


def pending(source: Source) -> dict:
    """Content-free counts per cursor of events captured and not acknowledged (health)."""
    out: dict[str, dict[str, int]] = {}
    for cursor, state in (EventAck.objects.filter(source=source)
                          .exclude(state=EventAck.State.ACKED)
                          .values_list("cursor", "state")):
        out.setdefault(cursor, {}).setdefault(state, 0)
        out[cursor][state] += 1
    return out
