"""Cards that stop working: when the timeline shows a request answered (from the web, the
API or another card), its turn ended (completed, failed, cancelled — an interrupt or a
close ends the turn), or the session was archived, the open question and permission
cards it concerns become answered or inert; a conversation whose generation moved on
(its session replaced) leaves its older cards inert. (Goal cards are not released here:
a replaced or cleared goal's card goes inert by its ``goal_key``, ``actions``.)

conversations/actions.py calls `cards_released_by(...)` for each timeline event of a bound
session (and `stale_cards(conversation)` after raising a generation), inside the
transaction in which it enqueues the patches (the timeline writer's, or intake's): the rows
change state here, under a row lock (conversations/locks.py), so each card is patched
once; it patches each returned card with its new JSON. Each opens a savepoint of its own,
never a transaction: on its own (a test) it is one."""

from __future__ import annotations

from django.db import transaction

from conversations import locks
from conversations.cards import language
from conversations.cards import permission as permission_card
from conversations.cards import question as question_card
from conversations.models import Conversation, EventCard
from sessions.models import TimelineEvent

ANSWERS = ("question.answered", "permission.answered")
TURN_ENDS = ("turn.completed", "turn.failed", "turn.cancelled")
SESSION_ENDS = ("session.archived",)
RENDERERS = {"question": question_card, "permission": permission_card}


def _asked(card: EventCard) -> dict:
    return (TimelineEvent.objects.filter(session_id=card.session_id, seq=card.event_seq)
            .values_list("payload", flat=True).first()) or {}


def _lang(card: EventCard) -> str:
    return language(card.conversation.source.config)


def cards_released_by(session_id: int, event_type: str, payload: dict | None = None,
                      turn_id: int | None = None) -> list[tuple[EventCard, dict]]:
    """The open question / permission cards this timeline event closes, each with the
    card JSON to patch it to; their rows are marked answered or inert. Called inside the
    caller's transaction, the rows stay locked until it ends."""
    with transaction.atomic():
        return _released_by(session_id, event_type, payload, turn_id)


def _released_by(session_id: int, event_type: str, payload: dict | None,
                 turn_id: int | None) -> list[tuple[EventCard, dict]]:
    payload = payload or {}
    open_cards = EventCard.objects.filter(session_id=session_id, kind__in=RENDERERS,
                                          state=EventCard.State.OPEN)
    if event_type in ANSWERS:
        kind = "question" if event_type == "question.answered" else "permission"
        cards = locks.event_cards(open_cards.filter(kind=kind,
                                                    request_id=payload.get("request_id") or ""))
        out = []
        for card in cards:
            asked = _asked(card)
            if kind == "question":
                data = question_card.answered(asked, lang=_lang(card))
            else:
                data = permission_card.answered(asked, lang=_lang(card),
                                                option_id=payload.get("option_id"))
            out.append((card, data))
        _mark(cards, EventCard.State.ANSWERED)
        return out
    if event_type in TURN_ENDS:
        if turn_id is not None:  # the cards of that turn's requests
            seqs = TimelineEvent.objects.filter(
                session_id=session_id, turn_id=turn_id,
                type__in=["question.asked", "permission.requested"]).values("seq")
            open_cards = open_cards.filter(event_seq__in=seqs)
        return _inert(locks.event_cards(open_cards), "turn")
    if event_type in SESSION_ENDS:
        return _inert(locks.event_cards(open_cards), "turn")
    return []


def stale_cards(conversation: Conversation) -> list[tuple[EventCard, dict]]:
    """Open question / permission cards of a conversation sent under an older generation
    (or for a session it no longer binds), made inert."""
    with transaction.atomic():
        return _stale(conversation)


def _stale(conversation: Conversation) -> list[tuple[EventCard, dict]]:
    cards = locks.event_cards(EventCard.objects.filter(
        conversation=conversation, kind__in=RENDERERS, state=EventCard.State.OPEN))
    stale = [c for c in cards if c.generation != conversation.generation
             or c.session_id != conversation.session_id]
    return _inert(stale, "stale")


def _inert(cards: list[EventCard], reason: str) -> list[tuple[EventCard, dict]]:
    out = [(c, RENDERERS[c.kind].released(_asked(c), lang=_lang(c), reason=reason))
           for c in cards]
    _mark(cards, EventCard.State.INERT)
    return out


def _mark(cards: list[EventCard], state: str) -> None:
    EventCard.objects.filter(pk__in=[c.pk for c in cards]).update(state=state)
    for c in cards:
        c.state = state
