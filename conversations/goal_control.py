"""What a goal card's button does: pause, resume or clear the goal the card was made for.

A click arrives as a signed ``card.action.trigger`` at ``POST /hooks/lark/<slug>``; intake
verifies it and hands it to ``conversations.card_actions.handle``, which checks that the
callback is new, that the conversation still binds the session, that ``gen`` is the
conversation's generation and that the operator may act, then calls the handler that
``conversations.goal_actions`` registered for ``goal.pause`` / ``goal.resume`` /
``goal.clear``, which calls ``control`` here. Here the goal itself is checked: the card's
``goal_key`` must be the session's goal now, so a card of a replaced (``goal set``) or
cleared goal controls nothing (``GoalRefused`` with code ``stale_goal``, shown as an error
toast). The command then goes the way a typed one goes (``sessions.native_goals.run``).
"""

from __future__ import annotations

from typing import Any

from sessions import native_goals
from sessions.native_goal_commands import GoalCommand

VERBS = {"goal.pause": "pause", "goal.resume": "resume", "goal.clear": "clear"}
TOASTS = {"pause": "Goal paused · 目标已暂停", "resume": "Goal resumed · 目标已继续",
          "clear": "Goal cleared · 目标已清除"}


def control(kind: str, value: dict[str, Any], *, operator: str, source: Any = None,
            conversation: Any = None, message_id: str | None = None) -> str:
    """Carry out the button ``kind``; the toast text. Raises ``native_goals.GoalRefused``."""
    verb = VERBS.get(kind)
    if verb is None:
        raise native_goals.GoalRefused(f"unknown goal action {kind!r}", code="invalid", status=400)
    session_id, goal_key = value.get("session"), value.get("goal_key")
    if not isinstance(session_id, int) or not isinstance(goal_key, str) or not goal_key:
        raise native_goals.GoalRefused("the card names no goal", code="invalid", status=400)
    origin = {"via": "lark", "actor": operator,
              "source": getattr(source, "slug", source),
              "conversation": getattr(conversation, "pk", conversation),
              "message_id": message_id}
    native_goals.run(session_id, GoalCommand(verb), origin, goal_key=goal_key)
    return TOASTS[verb]
