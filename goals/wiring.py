"""Everything goals plugs into the apps below it (called once from GoalsConfig.ready):
intake's consumer of the Lark sources a Lark Bot connector listens on, and the session
queue's crash-safe dispatch, replies back through a connector, and the goal's token quota
checked before each model request of its sessions."""

from __future__ import annotations

from effects import events, outbox
from effects.models import EffectKind
from goals import inbox_turns, queue, read, replies, turn_end, turns, writeback
from goals.consumer import GoalsConsumer, claims
from intake import consumers
from sessions import hooks as session_hooks


def wire() -> None:
    consumers.register(GoalsConsumer(), claims=claims)
    # the session queue's crash-safe dispatch: one row per session, one item a run
    outbox.register(queue.EFFECT_KIND)(queue.dispatch)
    # a connector's reply (an inbox settle's, a steered turn's answer), read back
    outbox.register(replies.EFFECT_KIND)(replies.deliver)
    # a managed agent's async inbox, drained and settled in turns of its own
    outbox.register(inbox_turns.rules.EFFECT_KIND)(inbox_turns.drive)
    # a managed turn's supervisor: one row per envelope in flight
    outbox.register(turns.EFFECT_KIND)(turns.drive)
    # an attached agent's "done", checked in its session before the todo is done
    outbox.register(writeback.EFFECT_KIND)(writeback.validate)
    # what waits for a session's turn (an envelope, a reply, the queue) moves on at its end
    events.subscribe(EffectKind.TURN_ENDED, turn_end.SUBSCRIBER)(turn_end.turn_ended)
    # before each model request of a goal's session (sessions/model_gateway.py)
    session_hooks.model_request_caps.register(read.model_request_refusal,
                                              read.MODEL_REQUEST_PROBE)
