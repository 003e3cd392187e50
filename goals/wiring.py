"""Everything goals plugs into the apps below it (called once from GoalsConfig.ready):
intake's consumer of the Lark sources a Lark Bot connector listens on, and the session
queue's crash-safe dispatch, and replies back through a connector."""

from __future__ import annotations

from effects import outbox
from goals import queue, replies
from goals.consumer import GoalsConsumer, claims
from intake import consumers


def wire() -> None:
    consumers.register(GoalsConsumer(), claims=claims)
    # the session queue's crash-safe dispatch: one row per session, one item a run
    outbox.register(queue.EFFECT_KIND)(queue.dispatch)
    # a connector's reply (an inbox settle's, a steered turn's answer), read back
    outbox.register(replies.EFFECT_KIND)(replies.deliver)
