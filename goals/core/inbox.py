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

EFFECT_KINDS = ("todo", "design_revision", "no_follow_up", "owner_gate", "pending_decision",
                "evidence_gap")
# Effects that change no goal truth and wait for a person instead: each opens a decision
# on the goal (seed 003: a comment that contradicts accepted state is recorded as a
# pending decision or evidence gap rather than silently changing Goal truth).
DECISION_KINDS = ("owner_gate", "pending_decision", "evidence_gap")
DECISION_TEXT_MAX = 2000
RESOLUTION_MAX = 2000
# The members each kind takes; any other is refused by name (a typo is never dropped).
_MEMBERS = {
    "todo": {"todo", "title", "state", "evidence"},
    "design_revision": {"material", "body", "title"},
    "no_follow_up": {"rationale"},
    "owner_gate": {"question"},
    "pending_decision": {"question", "contradicts", "todo"},
    "evidence_gap": {"gap", "todo"},
}
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
    unknown = sorted(str(k) for k in effect if k != "kind" and k not in _MEMBERS[kind])
    if unknown:
        raise Refused(f"unknown field{'s' if len(unknown) > 1 else ''} of a {kind} effect: "
                      f"{', '.join(unknown)}", code="invalid", status=400,
                      field=f"effect.{unknown[0]}")
    if kind in ("todo", "design_revision") and goal_state in CLOSED_GOALS:
        raise Refused(f"the goal is {goal_state}: settle with no_follow_up, owner_gate, "
                      "pending_decision or evidence_gap", code="goal_closed", status=409,
                      field="effect.kind")
    if kind == "pending_decision":
        return Effect(kind, {
            "question": _text(effect, "question", limit=DECISION_TEXT_MAX),
            "contradicts": _text(effect, "contradicts", limit=DECISION_TEXT_MAX,
                                 required=False),
            "todo": _todo_id(effect, required=False)})
    if kind == "evidence_gap":
        return Effect(kind, {"gap": _text(effect, "gap", limit=DECISION_TEXT_MAX),
                             "todo": _todo_id(effect, required=False)})
    if kind == "todo":
        todo = _todo_id(effect, required=False)
        if todo is None:
            return Effect(kind, {"title": _text(effect, "title", limit=300)})
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
    return Effect(kind, {"question": _text(effect, "question", limit=DECISION_TEXT_MAX)})


def _todo_id(effect: dict, *, required: bool) -> int | None:
    todo = effect.get("todo")
    if todo is None and not required:
        return None
    if isinstance(todo, bool) or not isinstance(todo, int) or todo < 1:
        raise Refused("effect.todo must be a todo id", code="invalid", status=400,
                      field="effect.todo")
    return todo


def check_todo_change(todo_id: int, todo_state: str) -> None:
    """An inbox event may not change a todo that is done: a person accepted it, and a
    message or comment that says otherwise is a pending decision for a person, never a
    silent change of what the goal holds true."""
    if todo_state == "done":
        raise Refused(f"todo {todo_id} is done (accepted state): settle with a "
                      "pending_decision that names it, for a person to decide",
                      code="contradicts_accepted", status=409, field="todo")


def decision_text(kind: str, fields: dict) -> str:
    """What a decision asks a person, from its effect."""
    return fields["gap"] if kind == "evidence_gap" else fields["question"]


def check_resolution(resolution: object, state: str) -> str:
    """How a person resolves an open decision: a non-empty note, once."""
    if state != "open":
        raise Refused("this decision is resolved already", code="resolved", status=409)
    if (not isinstance(resolution, str) or not resolution.strip()
            or len(resolution) > RESOLUTION_MAX):
        raise Refused(f"resolution must be a non-empty string of at most {RESOLUTION_MAX} "
                      "characters", code="invalid", status=400, field="resolution")
    return resolution.strip()


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
