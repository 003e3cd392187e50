"""Replies back through a connector's reply_mode, one place for both paths that need one:
an inbox event settled with a reply (goals/inbox.py) and the final answer of a session
turn a live_steering or session_queue receipt started (goals/ingress.py, goals/queue.py).

Each goes through the outbox (kind ``goals.connector_reply``): the reply is sent once
(Lark's ``uuid`` from the reply's id; a document comment's marker), then read back from
the provider; only a reply the provider shows acknowledges its inbox event. One that does
not read back raises (intake.acks.ReplyNotReadBack), so the outbox retries it and the
event stays unacknowledged; a place that refuses it for good (the message withdrawn) is
acknowledged as ``reply_gone``, content-free."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from effects import outbox
from execution.task_runs import final_answer
from goals import comments, locks
from goals.models import ConnectorReply, InboxEvent, IngressReceipt
from intake.acks import ReplyNotReadBack
from intake.models import Thread
from intake.send import send
from intake.sources import ReadsRepliesBack, RepliesInChat, plugin
from intake.sources.base import Message, SendResult
from sessions.models import Turn, TurnState

log = logging.getLogger(__name__)

EFFECT_KIND = "goals.connector_reply"
# a row waiting for a turn to end is woken by the turn-ended fact; this is only a floor
WAKE_FLOOR_S = 300
# a chat message's turn answers there (in its thread, or in the configured mirror chat)
TURN_REPLY_MODES = ("source_thread", "topic_reply", "configured_mirror")
MIRROR = "chat:"  # a reply_to that names a chat: a new message there, not a reply


def target(connector, receipt: IngressReceipt, thread: str = "") -> tuple[str, bool]:
    """Where the reply goes: on a document comment its comment thread; in a chat the
    message itself (its id is the receipt's dedupe key), in its topic when it is in one
    (source_thread) or opening one (topic_reply); with configured_mirror a new message in
    the connector's mirror chat (``chat:<chat id>``, fixed when the reply is asked for)."""
    if connector.reply_mode == "source_comment":
        return thread, False
    if connector.reply_mode == "configured_mirror":
        return f"{MIRROR}{connector.mirror_ref}", False
    return receipt.dedupe_key, connector.reply_mode == "topic_reply" or bool(thread)


def request(receipt: IngressReceipt, text: str, reply_to: str, in_thread: bool) -> None:
    """In the caller's transaction: the receipt's one reply, and its outbox row."""
    ConnectorReply.objects.get_or_create(
        receipt=receipt, defaults={"text": text, "reply_to": reply_to,
                                   "in_thread": in_thread})
    outbox.enqueue(EFFECT_KIND, f"reply:{receipt.pk}", {"receipt": receipt.pk})


def turn_key_of(receipt_id: int) -> str:
    """The outbox key of the reply that waits for a receipt's turn to end."""
    return f"turn:{receipt_id}"


def expect_turn(receipt: IngressReceipt) -> None:
    """In the transaction that started the receipt's turn: its final answer goes back
    through the connector once the turn ends (when the connector replies at all)."""
    connector = receipt.connector
    if connector.reply_mode in TURN_REPLY_MODES and connector.source_id:
        outbox.enqueue(EFFECT_KIND, turn_key_of(receipt.pk), {"receipt": receipt.pk,
                                                           "turn": True})


def _turn_answer(receipt: IngressReceipt) -> str | None:
    """The turn's final answer once it ended ("" when it ended without one); None while
    it runs (or has not started)."""
    turn = Turn.objects.filter(session_id=receipt.session_id, key=receipt.turn_key).first()
    if turn is None or turn.state in (TurnState.QUEUED, TurnState.RUNNING):
        return None
    return final_answer(turn.pk) if turn.state == TurnState.COMPLETED else ""


def deliver(effect_id: int, payload: dict) -> None:
    """The ``goals.connector_reply`` handler, idempotent per receipt: a reply already read
    back (or gone) changes nothing."""
    receipt = (IngressReceipt.objects.select_related("connector__source")
               .filter(pk=payload.get("receipt")).first())
    if receipt is None:
        return
    if payload.get("turn"):
        answer = _turn_answer(receipt)
        if answer is None:
            # the turn's session.turn_ended fact wakes this row (goals/turn_end.py)
            raise outbox.Later(WAKE_FLOOR_S, "the turn has not ended")
        if not answer.strip():
            return  # failed, cancelled or silent: nothing to say
        reply_to, in_thread = target(receipt.connector, receipt)
        ConnectorReply.objects.get_or_create(
            receipt=receipt, defaults={"text": answer, "reply_to": reply_to,
                                       "in_thread": in_thread})
    reply = ConnectorReply.objects.filter(receipt=receipt).first()
    if reply is None or reply.state != "pending":
        with transaction.atomic(durable=True):
            _acknowledge(receipt, reply)
        return
    ref = _send_and_read_back(receipt.connector.source, reply)
    with transaction.atomic(durable=True):
        reply = locks.reply(reply.pk)
        if reply.state == "pending":
            reply.state = "replied" if ref else "gone"
            reply.reply_ref, reply.verified_at = ref[:200], timezone.now()
            reply.save(update_fields=["state", "reply_ref", "verified_at"])
        _acknowledge(receipt, reply)


def _acknowledge(receipt: IngressReceipt, reply: ConnectorReply | None) -> None:
    """ACK the receipt's inbox event (if it came through the inbox) once its reply is
    read back or known gone. A document-comment connector's comment is handed back to its
    source's cursor in the same transaction (goals/comments.py); a chat connector has no
    cursor (its events are the provider's message ids)."""
    if reply is None or reply.state == "pending":
        return
    event = locks.inbox_event(InboxEvent.objects.filter(receipt=receipt))
    if event is None or event.state == "acked":
        return
    event.state, event.acked_at = "acked", timezone.now()
    event.outcome = "replied" if reply.state == "replied" else "reply_gone"
    event.claimed_until = None
    event.save(update_fields=["state", "acked_at", "outcome", "claimed_until"])
    comments.acknowledged(event)


def _send_and_read_back(source, reply: ConnectorReply) -> str:
    """Send the reply (once per reply id), then read it back: the provider's id of the
    reply as it shows it, or "" when the place refuses it for good. Raises
    ReplyNotReadBack when it is not shown (yet): the outbox tries again."""
    key = f"goals-reply-{reply.pk}"
    plug = plugin(source.kind, source.config, source.secrets)
    if reply.reply_to.startswith("doc:"):
        result = send(source, message_id=key, thread=reply.reply_to, text=reply.text)
        if result == SendResult.GONE:
            return ""
        if result != SendResult.SENT or not isinstance(plug, ReadsRepliesBack):
            raise ReplyNotReadBack(f"reply {reply.pk}: the comment reply was not sent")

        meta = (Thread.objects.filter(source=source, key=reply.reply_to)
                .values_list("meta", flat=True).first())
        ref = plug.read_back(Message(key, reply.reply_to, reply.text, meta=dict(meta or {})))
        if not ref:
            raise ReplyNotReadBack(f"reply {reply.pk}: the provider does not show it")
        return ref
    if not isinstance(plug, RepliesInChat):
        raise ReplyNotReadBack(f"reply {reply.pk}: a {source.kind} source cannot reply")
    if reply.reply_to.startswith(MIRROR):
        return _mirror(plug, key, reply)
    sent = plug.send_text(key=key, text=reply.text, reply_to=reply.reply_to,
                          in_thread=reply.in_thread)
    if sent.result == SendResult.GONE:
        return ""
    if sent.result != SendResult.SENT or not sent.message_id:
        raise ReplyNotReadBack(f"reply {reply.pk}: the provider asked to retry the reply")
    shown = plug.shown_message(sent.message_id)
    if (shown is None or shown["text"] != reply.text
            or reply.reply_to not in (shown["parent_id"], shown["root_id"])):
        raise ReplyNotReadBack(f"reply {reply.pk}: the provider does not show it")
    return sent.message_id


def _mirror(plug, key: str, reply: ConnectorReply) -> str:
    """A configured_mirror reply: a new message in the mirror chat (once per reply id),
    read back as Lark shows it — the same text, in that chat."""
    chat = reply.reply_to[len(MIRROR):]
    sent = plug.post_text(key=key, text=reply.text, chat_id=chat)
    if sent.result == SendResult.GONE:
        return ""
    if sent.result != SendResult.SENT or not sent.message_id:
        raise ReplyNotReadBack(f"reply {reply.pk}: the provider asked to retry the reply")
    shown = plug.shown_message(sent.message_id)
    if shown is None or shown["text"] != reply.text or shown["chat_id"] != chat:
        raise ReplyNotReadBack(f"reply {reply.pk}: the provider does not show it")
    return sent.message_id
