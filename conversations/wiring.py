"""Everything conversations plugs into the apps below it (called once from
ConversationsConfig.ready): intake's consumer of conversation-mode Lark sources, the
timeline of mirrored sessions, the outbox handlers that send the cards, and the card
callbacks (answers, permissions, goal controls) intake verifies."""

from __future__ import annotations

from conversations import (  # noqa: F401 - goal_actions, request_actions register kinds
    actions,
    card_actions,
    delivery,
    goal_actions,
    request_actions,
)
from conversations.consumer import ConversationsConsumer, claims
from effects import outbox
from intake import card_hooks, consumers
from sessions import hooks


def wire() -> None:
    consumers.register(ConversationsConsumer(), claims=claims)
    hooks.timeline_mirrored.provide(actions.timeline_mirrored)
    outbox.register(actions.REPLY_KIND)(delivery.send_reply)
    outbox.register(actions.CARD_KIND)(delivery.send_card)
    # card callbacks: intake verifies them and hands them to this app's checks
    card_hooks.register(card_actions.handle)
