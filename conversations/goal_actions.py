"""The goal card's buttons registered with the card callback (``conversations.card_actions``,
written by the cards helper): each goes through ``goal_control``; a refusal is an error
toast and changes nothing."""

from __future__ import annotations

from conversations import goal_control
from conversations.card_actions import CardAction, Refused, register
from sessions import native_goals


def _run(action: CardAction) -> str:
    try:
        return goal_control.control(action.kind, action.value, operator=action.operator,
                                    source=action.source, conversation=action.conversation,
                                    message_id=action.message_id)
    except native_goals.GoalRefused as exc:
        raise Refused(exc.code, str(exc)) from exc


@register("goal.pause")
def pause(action: CardAction) -> str:
    return _run(action)


@register("goal.resume")
def resume(action: CardAction) -> str:
    return _run(action)


@register("goal.clear")
def clear(action: CardAction) -> str:
    return _run(action)
