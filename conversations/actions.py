"""The one writer of a conversation's state: its Conversation row and the cards that show
it (TurnReply, EventCard; card_release marks the ones that stop working).

Three ways in, each one action:
- a Lark message intake recorded (`message_routed`): intake's consumer, so it runs in
  intake's transaction by design (the trigger, its conversation, the session and its input
  and the outbox rows commit together) and is not durable;
- a mirrored session's timeline events (`timeline_mirrored`): sessions' hook, in the
  timeline writer's transaction by design (it holds the session's lock), not durable — a
  turn's card is opened when it starts and re-rendered through one coalescing outbox row
  per turn;
- what the senders report (`reply_sent`, `card_sent`, …): each one durable transaction
  that locks the row it changes.
A card callback's answer marks its card inside the callback's transaction
(`request_card_answered`, card_actions). Locks: conversations/locks.py, in its order. Rules
are pure (conversations/rules.py); Lark calls happen only in the outbox handlers
(delivery.py).
"""

from __future__ import annotations

import logging

from django.db import transaction

from conversations import card_release, launch, locks, rules
from conversations.cards import goal as goal_card
from conversations.cards import language
from conversations.models import Conversation, EventCard, Mode, TurnReply
from effects import outbox
from effects.models import EffectKind
from intake.models import Trigger
from sessions import services
from sessions.models import Lifecycle, SessionGoal, TimelineEvent, Turn
from sessions.services import CommandError

log = logging.getLogger(__name__)

REPLY_KIND = EffectKind.CONVERSATION_REPLY
CARD_KIND = EffectKind.CONVERSATION_CARD
# Timeline events that change what a turn's card shows (deltas do not: the card shows
# whole messages, which keeps a streaming turn from re-rendering per token).
SHOWN = frozenset({"turn.started", "message.completed", "tool.started", "tool.completed",
                   "turn.completed", "turn.failed", "turn.cancelled"})
# Events that get a card of their own, by renderer kind (conversations/cards/<kind>.py).
EVENT_CARDS = {"question.asked": "question", "permission.requested": "permission",
               "goal.updated": "goal", "goal.cleared": "goal"}
# Events after which open question / permission cards stop working (conversations/card_release).
RELEASING = frozenset(card_release.ANSWERS + card_release.TURN_ENDS + card_release.SESSION_ENDS)


# ----------------------------------------------------------------- messages in
def bound(source, meta: dict) -> Conversation | None:
    """The conversation a message's place is bound to, if any."""
    mode = rules.mode_of(source.config)
    if mode is None:
        return None
    for place in rules.place_keys(mode, meta):
        found = Conversation.objects.filter(source=source, chat_id=place.chat_id,
                                            thread_key=place.thread_key).first()
        if found is not None:
            return found
    return None


def message_routed(trigger: Trigger) -> str:
    """Intake's new trigger of a conversation-mode source (unsaved, with the gate's
    decision): start the place's conversation, post into it, or nothing. Saves the
    trigger with its disposition and answers it. In intake's transaction (its consumer)."""
    source = trigger.source
    mode = rules.mode_of(source.config)
    meta = trigger.meta or {}
    if mode is None or not meta.get("message_id") or meta.get("own_message"):
        return _disposed(trigger, "ignored", rules.NOT_A_MESSAGE)
    conversation = bound(source, meta)
    action, why = rules.action(mode, trigger.decision or "ignore", conversation is not None)
    if action == rules.IGNORE:
        return _disposed(trigger, "not_accepted" if why else "ignored", why)
    if action == rules.START:
        # One start per place even across mailboxes (a singleton's chats, a plain message
        # and its topic): the source row serialises starts; then look again.
        locks.source_held(source.pk)
        conversation = bound(source, meta)
        if conversation is not None:
            action = rules.POST
    if action == rules.START:
        try:
            conversation = _started(source, mode, meta, trigger.actor)
        except CommandError as exc:
            log.warning("conversation on %s not started: %s", source.slug, exc)
            return _disposed(trigger, "not_started", exc.code)
    trigger.disposition = "started" if action == rules.START else "follow_up"
    trigger.save(force_insert=True)
    _post(conversation, trigger, mode)
    return trigger.disposition


def _disposed(trigger: Trigger, disposition: str, why: str | None) -> str:
    trigger.disposition = disposition
    if why:
        trigger.meta = {**(trigger.meta or {}), "conversation": why}
    trigger.save(force_insert=True)
    return disposition


def _started(source, mode: str, meta: dict, actor: str) -> Conversation:
    """The place's new conversation and its session (created from the Bot Profile's
    preset or the worker settings), marked as mirrored so its turns come back here. The
    caller holds the source's lock and found the place unbound under it: no other start
    can bind it first."""
    place = rules.place_keys(mode, meta)[0]
    where = "bot" if mode == Mode.SINGLETON else f"{place.chat_id}/{place.thread_key or 'dm'}"
    session = launch.start_session(source.config, name=f"Lark {source.slug} {where}"[:120],
                                   person=actor, shared=not rules.one_person(mode, place))
    services.set_mirrored(session.pk)
    return Conversation.objects.create(source=source, mode=mode, chat_id=place.chat_id,
                                       thread_key=place.thread_key, session=session,
                                       started_by=actor[:120])


def origin_of(conversation: Conversation, trigger: Trigger, mode: str) -> dict:
    meta = trigger.meta or {}
    return {"via": "lark", "actor": trigger.actor, "source": trigger.source.slug,
            "conversation": conversation.pk, "chat_id": meta.get("chat_id") or "",
            "message_id": meta.get("message_id") or "",
            "thread_key": conversation.thread_key or meta.get("thread_id") or "",
            "generation": conversation.generation,
            "in_thread": rules.in_thread(mode, meta)}


def _post(conversation: Conversation, trigger: Trigger, mode: str) -> None:
    """The message as the session's next input, through the session's one ordered ingress.
    An archived session is replaced by a new one (a new output generation)."""
    key = f"lark:{trigger.source_id}:{(trigger.meta or {}).get('message_id')}"
    text = trigger.text or ""
    try:
        services.post_message(conversation.session_id, text,
                              key=key, origin=origin_of(conversation, trigger, mode))
        return
    except services.Conflict as exc:
        if exc.code != "session_archived":
            raise
    conversation = locks.conversation(conversation.pk)
    replaced = conversation.session.lifecycle == Lifecycle.ARCHIVED
    if replaced:
        place = rules.Place(conversation.chat_id, conversation.thread_key)
        session = launch.start_session(trigger.source.config,
                                       name=conversation.session.name,
                                       person=conversation.started_by,
                                       shared=not rules.one_person(conversation.mode, place))
        services.set_mirrored(session.pk)
        conversation.session, conversation.generation = session, conversation.generation + 1
        conversation.save(update_fields=["session", "generation", "updated_at"])
    services.post_message(conversation.session_id, text, key=key,
                          origin=origin_of(conversation, trigger, mode))
    if replaced:  # the cards after the session (locks' order)
        _patch_all(card_release.stale_cards(conversation))


# ----------------------------------------------------------------- timeline out
def timeline_mirrored(session_id: int, events: list) -> None:
    """A mirrored session stored timeline events (sessions.hooks, in the timeline writer's
    transaction, which holds the session's lock): a starting turn gets its one card, and
    every change to what a card shows re-enqueues that turn's one coalescing reply effect
    (the latest state supersedes). Events that ask something of a person or report a goal
    get a card of their own."""
    turns: set[int] = set()
    for ev in events:
        if ev.type == "turn.started" and ev.turn_id:
            _reply_opened(session_id, ev.turn_id)
        if ev.type in SHOWN and ev.turn_id:
            turns.add(ev.turn_id)
        if ev.type in EVENT_CARDS:
            _event_card(session_id, ev)
        if ev.type in RELEASING:
            _patch_all(card_release.cards_released_by(session_id, ev.type, ev.payload,
                                                      ev.turn_id))
    for turn_id in sorted(turns):
        outbox.enqueue(REPLY_KIND, f"turn:{turn_id}", {"turn": turn_id})


def patch_requested(target: EventCard | TurnReply, card: dict, *, state: str | None = None
                    ) -> None:
    """Command: show `card` in place of a card sent before ("answered", "paused", inert
    buttons), in one durable transaction of its own."""
    with transaction.atomic(durable=True):
        _enqueue_patch(target, card, state=state)


def _enqueue_patch(target: EventCard | TurnReply, card: dict, *, state: str | None = None
                   ) -> None:
    """An update of a card sent before, through the outbox (the latest card for one target
    supersedes a waiting one); `state`: an EventCard's new state, set once it is through."""
    kind = "event_card" if isinstance(target, EventCard) else "turn_reply"
    outbox.enqueue(CARD_KIND, f"patch:{kind}:{target.pk}",
                   {"patch": kind, "id": target.pk, "card": card, "state": state})


def _patch_all(released: list[tuple[EventCard, dict]]) -> None:
    """Question and permission cards that stopped working (their rows are marked already)
    get their answered or inert look."""
    for card, body in released:
        _enqueue_patch(card, body)


def _conversation_of(session_id: int, origin: dict) -> Conversation | None:
    if origin.get("via") == "lark" and origin.get("conversation"):
        found = Conversation.objects.filter(pk=origin["conversation"],
                                            session_id=session_id).first()
        if found is not None:
            return found
    return Conversation.objects.filter(session_id=session_id).order_by("-id").first()


def latest_place(conversation: Conversation) -> tuple[str, str]:
    """(chat, message) a turn that did not come from Lark replies to: the place's latest
    message amux knows (so a web turn shows in the topic, in the canonical order)."""
    last = (TurnReply.objects.filter(conversation=conversation).exclude(reply_to="")
            .order_by("-id").values_list("chat_id", "reply_to").first())
    if last:
        return last
    return conversation.chat_id, ""


def _placed_origin(session_id: int, origin: dict) -> dict:
    """Where a turn is shown: a goal's turn where its goal was created (its output
    location, which `goal set` moves), not where someone spoke last — in a singleton
    that may be another chat."""
    if origin.get("via") != "goal":
        return origin
    location = SessionGoal.objects.filter(
        session_id=session_id, goal_key=origin.get("goal_key") or "").values_list(
        "location", flat=True).first()
    return location if isinstance(location, dict) and location.get("via") == "lark" \
        else origin


def _reply_opened(session_id: int, turn_id: int) -> None:
    """A starting turn's one card (its row; the reply effect posts it): a reply to its
    own Lark message, or — for a turn from the web, the API or a goal — to the place's
    latest message, so the place shows every turn in the canonical order."""
    origin = _placed_origin(session_id, Turn.objects.filter(pk=turn_id).values_list(
        "origin", flat=True).first() or {})
    conversation = _conversation_of(session_id, origin)
    if conversation is None:
        return
    if origin.get("via") == "lark" and origin.get("conversation") == conversation.pk:
        chat, reply_to = origin.get("chat_id") or conversation.chat_id, origin.get(
            "message_id") or ""
    else:
        chat, reply_to = latest_place(conversation)
    if not chat:
        return  # a singleton that never heard from any chat: nowhere to show it
    TurnReply.objects.get_or_create(turn_id=turn_id, defaults={
        "conversation": conversation, "chat_id": chat, "reply_to": reply_to,
        "generation": conversation.generation})


def _event_card(session_id: int, ev) -> None:
    kind = EVENT_CARDS[ev.type]
    payload = ev.payload or {}
    location = payload.get("location") if kind == "goal" else None
    rows = Conversation.objects.filter(session_id=session_id)
    if isinstance(location, dict) and location.get("conversation"):
        rows = rows.filter(pk=location["conversation"])
    for conversation in rows:
        reply = TurnReply.objects.filter(turn_id=ev.turn_id).first() if ev.turn_id else None
        if reply is not None:
            chat = reply.chat_id
        elif isinstance(location, dict) and location.get("chat_id"):
            chat = location["chat_id"]
        else:
            chat = latest_place(conversation)[0]
        if not chat:
            continue
        if kind == "goal" and _goal_card_updated(conversation, session_id, ev):
            continue
        card, created = EventCard.objects.get_or_create(
            conversation=conversation, event_seq=ev.seq, defaults={
                "session_id": session_id, "kind": kind,
                "request_id": str(payload.get("goal_key") if kind == "goal"
                                  else payload.get("request_id") or "")[:200],
                "chat_id": chat,
                "generation": conversation.generation})
        if created:
            outbox.enqueue(CARD_KIND, f"card:{card.pk}", {"card": card.pk})


def _goal_card_updated(conversation: Conversation, session_id: int, ev) -> bool:
    """One card per goal in a place, patched in place as the goal runs (a goal that runs
    a hundred turns is one message, not a hundred). A goal that is replaced or cleared
    leaves its card without buttons; False when this event needs a card of its own (a
    new goal, or a place that shows none yet)."""
    payload = ev.payload or {}
    key = str(payload.get("goal_key") or "")
    lang = language(conversation.source.config)
    updated = False
    for card in locks.event_cards(EventCard.objects.filter(
            conversation=conversation, kind="goal", state=EventCard.State.OPEN)):
        same = bool(key) and card.request_id == key
        if same and ev.type == "goal.updated":
            card.event_seq = ev.seq
            card.save(update_fields=["event_seq", "updated_at"])
            body = goal_card.render(payload, conversation_id=conversation.pk,
                                    session_id=session_id, generation=card.generation,
                                    lang=lang)
            updated = True
        else:  # replaced, or cleared (the cleared look when it is this goal's own card)
            shown = (TimelineEvent.objects.filter(session_id=session_id, seq=card.event_seq)
                     .values_list("payload", flat=True).first()) or {}
            body = goal_card.render(payload if same else shown,
                                    conversation_id=conversation.pk, session_id=session_id,
                                    generation=card.generation, lang=lang)
            body = goal_card.inert(body)
            card.state = EventCard.State.INERT
            card.save(update_fields=["state", "updated_at"])
            updated = updated or same
        _enqueue_patch(card, body)
    return updated


# ----------------------------------------------------------------- a card callback's answer
def request_card_answered(conversation: Conversation, kind: str, request_id: str) -> None:
    """A question or permission card answered from the card itself, in the callback's
    transaction (request_actions), before the answer leaves: the sender that sees the
    runtime's `*.answered` event waits on this row and then finds nothing left to patch,
    so the card keeps the answer the callback shows. The session is locked first (locks'
    order: an async answer is the session's next input, written under its lock)."""
    locks.session_held(conversation.session_id)
    for card in locks.event_cards(EventCard.objects.filter(
            conversation=conversation, session_id=conversation.session_id, kind=kind,
            request_id=request_id, state=EventCard.State.OPEN)):
        card.state = EventCard.State.ANSWERED
        card.save(update_fields=["state", "updated_at"])


# ----------------------------------------------------------------- what the senders report
def reply_sent(reply_id: int, *, message_id: str, rendered: str, final: bool) -> None:
    """The turn's card was posted (`updated_at`: when, which spaces the next patch)."""
    _reply_reported(reply_id, message_id=message_id, rendered=rendered, final=final)


def reply_patched(reply_id: int, *, rendered: str, final: bool) -> None:
    _reply_reported(reply_id, rendered=rendered, final=final)


def reply_given_up(reply_id: int) -> None:
    """The place refuses the card for good (the bot left the chat, the message is gone)."""
    _reply_reported(reply_id, final=True)


def _reply_reported(reply_id: int, **fields) -> None:
    with transaction.atomic(durable=True):
        reply = locks.turn_reply(reply_id)
        if reply is None:
            return
        for name, value in fields.items():
            setattr(reply, name, value)
        reply.save(update_fields=[*fields, "updated_at"])


def card_sent(card_id: int, *, message_id: str) -> None:
    with transaction.atomic(durable=True):
        card = locks.event_card(card_id)
        if card is not None and not card.message_id:
            card.message_id = message_id
            card.save(update_fields=["message_id", "updated_at"])


def card_gone(card_id: int) -> None:
    card_state(card_id, EventCard.State.INERT)


def card_state(card_id: int, state: str) -> None:
    """An event card's state (answered, inert), once its patch is through (delivery)."""
    with transaction.atomic(durable=True):
        card = locks.event_card(card_id)
        if card is not None:
            card.state = state
            card.save(update_fields=["state", "updated_at"])
