"""Everything conversations plugs into the apps below it (called once from
ConversationsConfig.ready): intake's consumer of conversation-mode Lark sources, the
timeline of mirrored sessions, and the outbox handlers that send the cards."""

from __future__ import annotations

from conversations import actions, delivery
from conversations.consumer import ConversationsConsumer, claims
from effects import outbox
from intake import consumers
from sessions import hooks


def wire() -> None:
    consumers.register(ConversationsConsumer(), claims=claims)
    hooks.timeline_mirrored.provide(actions.timeline_mirrored)
    outbox.register(actions.REPLY_KIND)(delivery.send_reply)
    outbox.register(actions.CARD_KIND)(delivery.send_card)
