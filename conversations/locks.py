"""The one module of conversations' lock querysets, and the order they are taken in.

A transaction that locks several rows takes them in this order, each kind in pk order:
a card callback's claim (an insert), the source (starts on one source are serial), the
conversation, the session (sessions.locks; the timeline writer holds it while it mirrors),
the conversation's event cards (a turn's reply row is only ever locked alone). Each is
FOR NO KEY UPDATE of its own row only (joined rows are read, not locked): inserts of rows
that merely refer to it go on meanwhile."""

from __future__ import annotations

from conversations.models import Conversation, EventCard, TurnReply
from intake.models import Source
from sessions import locks as session_locks


def _for_update(queryset):
    return queryset.select_for_update(no_key=True, of=("self",)).order_by("pk")


def source_held(source_id: int) -> None:
    """The source row locked, nothing read: one conversation starts per place even when
    two mailboxes of the source (a singleton's chats, a message and its topic) race."""
    _for_update(Source.objects.filter(pk=source_id)).values_list("pk").first()


def conversation(conversation_id: int) -> Conversation | None:
    return _for_update(Conversation.objects.filter(pk=conversation_id)).first()


def session_held(session_id: int) -> None:
    """The session's row (before any of its cards): the order its timeline writer uses."""
    session_locks.session_held(session_id)


def event_cards(queryset) -> list[EventCard]:
    """Event cards of ``queryset`` (EventCard rows), locked; the conversation and source
    they show come along, unlocked."""
    return list(_for_update(queryset.select_related("conversation__source")))


def event_card(card_id: int) -> EventCard | None:
    return _for_update(EventCard.objects.filter(pk=card_id)).first()


def turn_reply(reply_id: int) -> TurnReply | None:
    return _for_update(TurnReply.objects.filter(pk=reply_id)).first()
