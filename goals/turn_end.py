"""What goals does when a session's turn ends (its subscriber of ``session.turn_ended``,
effects/events.py): everything that waited for that turn moves on at once, instead of
looking again every few seconds —

- a managed agent's envelope whose attempt it was: its supervisor row (goals.turn) is due;
- a connector reply waiting for the turn's final answer (goals/replies.py);
- the session's queue of ingress waiting for the session to be idle: its head row is due
  (goals/queue.py);
- an inbox turn's settle, waiting for that turn's answer (goals/inbox_turns.py).

Waking is idempotent (a row that is not waiting is left alone), as the fact may arrive
twice."""

from __future__ import annotations

from effects import outbox
from goals import queue, replies, turns
from goals.core import inbox_turns
from goals.core import turns as rules
from goals.models import GoalTurn, IngressReceipt

SUBSCRIBER = "goals"


def turn_ended(effect_id: int, payload: dict) -> None:
    session_id, turn_id = payload.get("session"), payload.get("turn")
    for pk in GoalTurn.objects.filter(session_turn_id=turn_id,
                                      state=rules.RUNNING).values_list("pk", flat=True):
        turns.enqueue(pk)
    turn_key = payload.get("turn_key")
    if inbox_turns.is_inbox_turn(turn_key):
        outbox.wake(inbox_turns.EFFECT_KIND, inbox_turns.turn_key(turn_key))
    if turn_key:
        for pk in IngressReceipt.objects.filter(session_id=session_id,
                                                turn_key=turn_key).values_list("pk", flat=True):
            outbox.wake(replies.EFFECT_KIND, replies.turn_key_of(pk))
    queue.session_idle(session_id)
