"""Cards out to Lark, through the outbox and lark-oapi (the source's `domain`).

- `conversation.reply` (key `turn:<id>`, one coalescing row per turn): renders the turn's
  card from the timeline as it is now and posts it (once: Lark's `uuid` is derived from
  the reply's id) or patches it in place. At most one patch per card every
  `PATCH_SPACING` seconds (Lark allows 5 QPS per chat): a newer state waits (`Later`) and
  supersedes what was waiting; the final state is always sent.
- `conversation.card` (key `card:<id>`, or `patch:<target>:<id>` from `patch_card`): the
  card of a question, permission request or goal state, rendered by
  `conversations/cards/<kind>.py` when that module exists, else as plain text.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
from datetime import timedelta

from django.utils import timezone

from conversations import actions, cards
from conversations.cards import fallback
from conversations.cards import turn as turn_card
from conversations.models import Conversation, EventCard, TurnReply
from effects import outbox
from intake import send
from intake.sources.base import SendResult
from sessions.models import TimelineEvent

log = logging.getLogger(__name__)

PATCH_SPACING = 1.5  # seconds between two updates of one card
RENDERERS = {"question": "conversations.cards.question",
             "permission": "conversations.cards.permission",
             "goal": "conversations.cards.goal"}


class SendFailed(RuntimeError):
    """Lark did not take it this time: the outbox tries again with backoff."""


def rendered_hash(card: dict) -> str:
    return hashlib.sha256(json.dumps(card, sort_keys=True, ensure_ascii=False)
                          .encode()).hexdigest()


def _spacing_left(last_at) -> float:
    if last_at is None:
        return 0.0
    left = (last_at + timedelta(seconds=PATCH_SPACING) - timezone.now()).total_seconds()
    return max(0.0, left)


# ----------------------------------------------------------------- the turn card
def turn_view(reply: TurnReply) -> turn_card.TurnView:
    turn = reply.turn
    events = list(TimelineEvent.objects.filter(turn_id=turn.pk, type__in=actions.SHOWN)
                  .order_by("seq").values_list("type", "payload"))
    origin = turn.origin or {}
    quote = by = ""
    if origin.get("via") != "lark" or origin.get("conversation") != reply.conversation_id:
        quote = (turn.input or {}).get("text") or ""
        by = origin.get("actor") or origin.get("via") or ""
    return turn_card.view(turn.state, events, quote=quote, quote_by=by)


def send_reply(effect_id: int, payload: dict) -> None:
    reply = (TurnReply.objects.select_related("turn", "conversation__source")
             .filter(turn_id=payload.get("turn")).first())
    if reply is None or reply.final:
        return  # no card for this turn, its final state is shown, or the place refused it
    source = reply.conversation.source
    v = turn_view(reply)
    card = turn_card.render(v, cards.language(source.config))
    digest = rendered_hash(card)
    if not reply.message_id:
        origin = reply.turn.origin or {}
        in_thread = bool(origin.get("in_thread")) if origin.get("via") == "lark" else (
            reply.conversation.mode == "topic" and bool(reply.conversation.thread_key))
        sent = send.send_card(source, key=f"turn-reply:{reply.pk}", card=card,
                              reply_to=reply.reply_to, chat_id=reply.chat_id,
                              in_thread=in_thread)
        if sent.result is SendResult.GONE:
            actions.reply_given_up(reply.pk)
            return
        if sent.result is not SendResult.SENT or not sent.message_id:
            raise SendFailed(f"turn card not posted (code {sent.code})")
        actions.reply_sent(reply.pk, message_id=sent.message_id, rendered=digest,
                           final=v.final)
        return
    if digest == reply.rendered:
        if v.final and not reply.final:
            actions.reply_patched(reply.pk, rendered=digest, final=True)
        return
    wait = _spacing_left(reply.updated_at)
    if wait > 0:
        raise outbox.Later(wait, "spacing the card's updates")
    result = send.patch_card(source, message_id=reply.message_id, card=card)
    if result is SendResult.GONE:
        actions.reply_given_up(reply.pk)
        return
    if result is not SendResult.SENT:
        raise SendFailed("turn card not updated")
    actions.reply_patched(reply.pk, rendered=digest, final=v.final)


# ----------------------------------------------------------------- event cards
def render_event_card(card: EventCard, event: TimelineEvent, lang: str) -> dict:
    """The card of one event: its kind's renderer when that module exists, else text."""
    payload = event.payload or {}
    try:
        module = importlib.import_module(RENDERERS[card.kind])
    except ModuleNotFoundError as exc:
        if exc.name != RENDERERS[card.kind]:
            raise
        return fallback.render(card.kind, event.type, payload, lang=lang)
    return module.render(payload, conversation_id=card.conversation_id,
                         session_id=card.session_id, generation=card.generation, lang=lang)


def send_card(effect_id: int, payload: dict) -> None:
    if payload.get("patch"):
        return _patch(payload)
    card = (EventCard.objects.select_related("conversation__source")
            .filter(pk=payload.get("card")).first())
    if card is None or card.message_id:
        return
    event = TimelineEvent.objects.filter(session_id=card.session_id,
                                         seq=card.event_seq).first()
    if event is None:
        return
    source = card.conversation.source
    body = render_event_card(card, event, cards.language(source.config))
    reply = TurnReply.objects.filter(turn_id=event.turn_id).first() if event.turn_id else None
    reply_to = reply.reply_to if reply is not None else ""
    if not reply_to:
        reply_to = actions.latest_place(card.conversation)[1]
    sent = send.send_card(source, key=f"event-card:{card.pk}", card=body, reply_to=reply_to,
                          chat_id=card.chat_id,
                          in_thread=card.conversation.mode == "topic"
                          and bool(card.conversation.thread_key))
    if sent.result is SendResult.GONE:
        actions.card_gone(card.pk)
        return
    if sent.result is not SendResult.SENT or not sent.message_id:
        raise SendFailed(f"event card not posted (code {sent.code})")
    actions.card_sent(card.pk, message_id=sent.message_id)


def _patch(payload: dict) -> None:
    model = EventCard if payload["patch"] == "event_card" else TurnReply
    target = model.objects.filter(pk=payload.get("id")).first()
    if target is None:
        return
    if not target.message_id:
        raise outbox.Later(2, "the card is not posted yet")
    conversation = Conversation.objects.select_related("source").get(
        pk=target.conversation_id)
    result = send.patch_card(conversation.source, message_id=target.message_id,
                             card=payload["card"])
    if result is SendResult.GONE:
        return
    if result is not SendResult.SENT:
        raise SendFailed("card not updated")
    if payload.get("state") and model is EventCard:
        actions.card_state(target.pk, payload["state"])


def patch_card(target: EventCard | TurnReply, card: dict, *, state: str | None = None) -> None:
    """Enqueue an update of a card sent before (cards and goals: "answered", "paused",
    inert buttons); the latest card for one target supersedes a waiting one. `state`: an
    EventCard's new state, set once the patch is through."""
    actions.patch_requested(target, card, state=state)
