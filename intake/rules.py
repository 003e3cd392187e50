"""Pure rules of intake: what a translated event writes, and the health it leaves."""

from __future__ import annotations

from dataclasses import dataclass, field

from amux_common.trigger_facts import TriggerFacts
from intake.text_cap import cap_text

# Errors worth remembering in health are content-free: a reason code and a time.
MAX_REASONS = 50


@dataclass(frozen=True)
class Outcome:
    outcome: str  # admitted, ignored, duplicate
    reason: str = ""
    trigger: int | None = None
    thread: int | None = None
    facts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class NotForAnyone:
    """An event that intake, not the source, found concerns no thread (shaped like the
    sources' Ignored)."""

    reason: str
    thread: str = ""
    facts: dict = field(default_factory=dict)


def ignored(reason: str) -> NotForAnyone:
    return NotForAnyone(reason)


def is_trigger(result) -> bool:
    """A translated event is a trigger (TriggerFacts) or a content-free "ignored" (the
    sources' Ignored, intake's NotForAnyone)."""
    return isinstance(result, TriggerFacts)


def thread_facts(result) -> dict:
    return dict(result.facts or {})


def thread_defaults(result) -> dict:
    if not is_trigger(result):
        return {"title": "", "url": ""}
    return {"title": (result.thread_title or "")[:300], "url": (result.thread_url or "")[:500]}


def trigger_fields(facts: TriggerFacts, decision: dict) -> dict:
    """The Trigger's columns from the source's facts and the gate's decision (if any): the
    one place they are derived."""
    return {
        "external_id": facts.external_id[:300],
        "scope": facts.scope,
        "actor": (facts.actor or "")[:200],
        "is_human": facts.is_human,
        "is_bot": facts.is_bot,
        "addressed": facts.addressed,
        "receives_all": facts.receives_all,
        # Capped here, once: the ticket's input is made from the trigger's text.
        "text": cap_text(facts.text or ""),
        "meta": facts.meta,
        "decision": decision.get("decision") or "",
        "strength": decision.get("strength") or "",
        "rule": (decision.get("rule") or "")[:120],
        "reason": (decision.get("reason") or "")[:80],
        "policy_version": decision.get("version") or "",
    }


ERROR_MESSAGE_CHARS = 300


def note_rejection(health: dict, reason: str, now, error: bool, n: int = 1,
                   message: str = "") -> dict:
    """Count one more refusal for ``reason``; an error also becomes the source's last
    error, with what failed in one clipped line (``message``: amux's own failure, e.g. a
    poll's exception, never a request's content)."""
    health = dict(health or {})
    rejected = dict(health.get("rejected") or {})
    if reason in rejected or len(rejected) < MAX_REASONS:
        rejected[reason] = int(rejected.get(reason, 0)) + n
    health["rejected"] = rejected
    if error:
        health["last_error"] = {"reason": reason, "at": now.isoformat()}
        line = " ".join(message.split())
        if line:
            health["last_error"]["message"] = line[:ERROR_MESSAGE_CHARS]
    return health


def note_cursor(health: dict, name: str, cursor, now, extra: dict | None = None) -> dict:
    """`value` is shown (a time or an id); `extra` keeps what else the cursor needs."""
    health = dict(health or {})
    cursors = dict(health.get("cursors") or {})
    cursors[name] = {**(extra or {}), "value": cursor, "at": now.isoformat()}
    health["cursors"] = cursors
    return health
