"""Draining and settling an agent's async inbox (seed 003, "Capture, replay, and
acknowledgement"): which events a drain takes, how long its claim lasts, and which
settle effects are acceptable. Pure: goals/inbox.py applies it under the agent's lock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from goals.core.lifecycle import Refused
from goals.core.urgency import ASKS_FOR_REPLY

DRAIN_MAX = 20              # events one drain takes at most
LEASE_DEFAULT_S = 300       # a drain's claim; an expired claim is taken by the next drain
LEASE_MIN_S, LEASE_MAX_S = 30, 3600
REPLY_MAX = 10_000          # characters of one connector reply

EFFECT_KINDS = ("todo", "design_revision", "no_follow_up", "owner_gate")
# Replies that go back to the place the event came from, or to the connector's configured
# mirror chat; none replies nothing.
REPLYING_MODES = ("source_thread", "topic_reply", "source_comment", "configured_mirror")
# Goals whose todos and materials no longer change: only a rationale or a gate settles.
CLOSED_GOALS = ("done", "abandoned")


def drain_rank(kind: str) -> int:
    """Events that ask for a reply (mentions, direct questions) come before ordinary
    messages; within a rank the oldest comes first."""
    return 0 if kind in ASKS_FOR_REPLY else 1


def claim_live(claimed_until: datetime | None, now: datetime) -> bool:
    return claimed_until is not None and claimed_until > now


def lease(seconds: int | None) -> timedelta:
    value = LEASE_DEFAULT_S if seconds is None else seconds
    if not LEASE_MIN_S <= value <= LEASE_MAX_S:
        raise Refused(f"lease_s must be {LEASE_MIN_S} to {LEASE_MAX_S} seconds",
                      code="invalid", status=400, field="lease_s")
    return timedelta(seconds=value)


@dataclass(frozen=True)
class Effect:
    kind: str
    fields: dict


def _text(effect: dict, name: str, *, limit: int, required: bool = True) -> str | None:
    value = effect.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise Refused(f"effect.{name} must be a non-empty string of at most {limit} "
                      "characters", code="invalid", status=400, field=f"effect.{name}")
    return value


def check_effect(effect: object, goal_state: str) -> Effect:
    """The settle's durable effect, checked against the goal as it is now."""
    if not isinstance(effect, dict):
        raise Refused("effect must be an object with a kind", code="invalid", status=400,
                      field="effect")
    kind = effect.get("kind")
    if kind not in EFFECT_KINDS:
        raise Refused(f"effect.kind must be one of {', '.join(EFFECT_KINDS)}",
                      code="invalid", status=400, field="effect.kind")
    if kind in ("todo", "design_revision") and goal_state in CLOSED_GOALS:
        raise Refused(f"the goal is {goal_state}: settle with no_follow_up or owner_gate",
                      code="goal_closed", status=409, field="effect.kind")
    if kind == "todo":
        todo = effect.get("todo")
        if todo is None:
            return Effect(kind, {"title": _text(effect, "title", limit=300)})
        if isinstance(todo, bool) or not isinstance(todo, int) or todo < 1:
            raise Refused("effect.todo must be a todo id", code="invalid", status=400,
                          field="effect.todo")
        fields = {"todo": todo,
                  "title": _text(effect, "title", limit=300, required=False),
                  "state": _text(effect, "state", limit=10, required=False),
                  "evidence": _text(effect, "evidence", limit=20_000, required=False)}
        return Effect(kind, fields)
    if kind == "design_revision":
        return Effect(kind, {"material": _text(effect, "material", limit=120),
                             "body": _text(effect, "body", limit=1_000_000),
                             "title": _text(effect, "title", limit=200, required=False)})
    if kind == "no_follow_up":
        return Effect(kind, {"rationale": _text(effect, "rationale", limit=2000)})
    return Effect(kind, {"question": _text(effect, "question", limit=2000)})


def check_reply(reply: object, reply_mode: str) -> str:
    """The optional reply, against what the connector can do: "" for none."""
    if reply is None:
        return ""
    if not isinstance(reply, str) or not reply.strip() or len(reply) > REPLY_MAX:
        raise Refused(f"reply must be a non-empty string of at most {REPLY_MAX} characters",
                      code="invalid", status=400, field="reply")
    if reply_mode == "none":
        raise Refused("the connector is read-only (reply_mode none): settle without a reply",
                      code="read_only", status=400, field="reply")
    if reply_mode not in REPLYING_MODES:
        raise Refused(f"reply_mode {reply_mode} has no way to reply", code="reply_unsupported",
                      status=409, field="reply")
    return reply
