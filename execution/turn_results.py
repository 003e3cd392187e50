"""What became of one input posted with a key: its turn (or the continuation a lost host
left, ``<key>:resumed``), and the outcome as callers read it."""

from __future__ import annotations

from typing import Any

from execution.task_runs import final_answer
from sessions.models import TimelineEvent, Turn, TurnState

STATE = {TurnState.QUEUED: "queued", TurnState.RUNNING: "running",
         TurnState.COMPLETED: "succeeded", TurnState.FAILED: "failed",
         TurnState.CANCELLED: "cancelled"}
ENDED = ("succeeded", "failed", "cancelled")


def turn_for_key(session_id: int, key: str) -> Turn | None:
    """The latest turn carrying the input: a continuation (``key:resumed``) supersedes the
    turn a lost host cut short."""
    return (Turn.objects.filter(session_id=session_id, key__startswith=key)
            .order_by("-seq").first())


def _failure(turn: Turn) -> dict[str, str]:
    payload = (TimelineEvent.objects.filter(turn=turn, type__in=["turn.failed",
                                                                 "turn.cancelled"])
               .values_list("payload", flat=True).first()) or {}
    message = payload.get("message") or payload.get("reason") or ""
    return {"code": turn.error_code or turn.state, "message": str(message)}


def outcome(turn: Turn | None) -> dict[str, Any]:
    """``{"state", "turn", "result", "error"}``; ``state`` is ``queued`` until the input
    has a turn."""
    if turn is None:
        return {"state": "queued", "turn": None, "result": None, "error": None}
    state = STATE.get(TurnState(turn.state), turn.state)
    return {"state": state, "turn": turn.seq,
            "result": (final_answer(turn.pk) or None) if state == "succeeded" else None,
            "error": _failure(turn) if state in ("failed", "cancelled") else None}
