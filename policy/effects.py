"""Policy effects (pure: plain data in, plain data out).

``policy_effects(old, new, mandates)`` lists exactly the live tickets a new policy version
affects and why, by asking the gate the same question twice — the mandate's original facts
under the old version and under the new one — so only a change this save made can affect a
ticket. A ticket admitted under the new version already (its application runs from the
outbox, after the save, so work may be admitted under it first) is not affected, as an eval
started under it is kept and a request awaiting the main session under it is not decided
again (tickets/actions/policy_changes.py):

- ``rule_disabled``: the cell the work rested on no longer admits it (closed, its row or
  source removed from the policy);
- ``requester_ineligible``: the requester is no longer on the allowlist (or the bot list);
- ``rule_changed``: it is still admitted, but by another cell or with another strength
  (or admitted again after having lost its rule);
- ``acceptance_closed``: an inferred (proactive) ticket and acceptance went from auto to
  manual.

Nothing is cancelled: the caller (tickets/actions/policy_changes.py) delivers one input
per affected ticket telling its executor what changed. ``mandates`` are dicts: ``ticket``
(id), ``source`` (slug), ``scope``, ``strength``, ``rule``, ``requester``, ``basis``
(the trigger facts that admitted it: ``is_bot``, ``is_human``, ``addressed``, ``receives_all``)
and ``policy_version`` (the version that admitted it).

The check before a ticket resumes (its source still exists, is enabled and listens to the
ticket's thread) is the ticket's own rule: tickets/core/resume.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policy.document import CELL_LABELS, SourceInfo, compile_policy, row_label
from policy.gate import (
    ADDRESSED,
    AUTO,
    BOT_NOT_LISTED,
    BOTS,
    INFERRED,
    NOT_ALLOWED,
    PLACED_SCOPES,
    UNADDRESSED_CELLS,
    Facts,
    Verdict,
    base_scope,
    gate,
)
from prompts_app import contract

RULE_DISABLED = "rule_disabled"
REQUESTER_INELIGIBLE = "requester_ineligible"
RULE_CHANGED = "rule_changed"
ACCEPTANCE_CLOSED = "acceptance_closed"
EFFECT_REASONS = (RULE_DISABLED, REQUESTER_INELIGIBLE, RULE_CHANGED, ACCEPTANCE_CLOSED)

REASON_TEXT = {
    RULE_DISABLED: "the rule your work was admitted under has been turned off",
    REQUESTER_INELIGIBLE: "the person (or bot) who asked for this work is no longer eligible",
    RULE_CHANGED: "the rule your work was admitted under has changed",
    ACCEPTANCE_CLOSED: "proactive acceptance has been closed (acceptance is now manual)",
}


@dataclass(frozen=True)
class Affected:
    ticket: object
    reasons: tuple[str, ...]
    before: Verdict
    after: Verdict
    text: str

    def as_dict(self) -> dict:
        return {"ticket": self.ticket, "reasons": list(self.reasons),
                "before": self.before.as_dict(), "after": self.after.as_dict(),
                "text": self.text}


def _rule_parts(rule: str) -> tuple[str, str, str]:
    """``<source>.<scope>.<cell>`` → its three parts (the source slug may hold no dot)."""
    parts = (rule or "").rsplit(".", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")


def facts_of(mandate: Mapping, kinds: Mapping[str, str]) -> Facts:
    """The trigger facts that admitted a mandate, from its basis (or, for a basis that lacks
    them, from the cell it names)."""
    basis = mandate.get("basis") or {}
    r_source, r_scope, cell = _rule_parts(mandate.get("rule") or "")
    source = mandate.get("source") or r_source
    scope = mandate.get("scope") or base_scope(r_scope)
    # the group a per-group row decides for: kept in the basis (or named by the rule)
    place = basis.get("place") or r_scope.partition(":")[2]
    is_bot = basis.get("is_bot", cell == BOTS)
    return Facts(
        source=source,
        kind=kinds.get(source, ""),
        scope=scope,
        actor=mandate.get("requester") or "",
        is_human=basis.get("is_human", not is_bot),
        is_bot=is_bot,
        addressed=basis.get("addressed", cell == ADDRESSED),
        receives_all=basis.get("receives_all", cell in UNADDRESSED_CELLS or not cell),
        place=place if scope in PLACED_SCOPES else "",
    )


def _message(reasons: Iterable[str], rule: str, new_version: str | None,
             before: Verdict, after: Verdict) -> str:
    """The input for the executor: the code-owned notice text (prompts_app contract
    ``notice.policy_changed``) filled with what changed; content-free."""
    effect = "; ".join(REASON_TEXT[r] for r in reasons)
    if before.rule and after.rule and before.rule != after.rule:
        effect += f"; it is now admitted by {_describe(after.rule)}"
    version = str(new_version or "none")[:12]
    fixed = contract.get("notice.policy_changed")
    if fixed is not None:
        text = fixed.text.format(effect=effect, rule=rule or "\u2014", version=version)
    else:  # pragma: no cover - the contract always registers it
        text = f"The policy changed: {effect}. Rule {rule} (policy {version})."
    return text + " Nothing has been cancelled."


def _describe(rule: str) -> str:
    source, scope, cell = _rule_parts(rule)
    label = "the bot list" if cell == BOTS else CELL_LABELS.get(cell, cell).lower()
    return f"{source} \u00b7 {row_label(scope)} \u00b7 {label}"


def policy_effects(old: Mapping, new: Mapping, mandates: Iterable[Mapping],
                   sources: Mapping[str, SourceInfo] | None = None,
                   old_version: str | None = None,
                   new_version: str | None = None) -> list[Affected]:
    """The live tickets a change from ``old`` to ``new`` (canonical documents) affects."""
    kinds = {slug: info.kind for slug, info in (sources or {}).items()}
    # The cells are compared with acceptance open on both sides; acceptance is its own reason.
    old_cells = compile_policy(old, sources, acceptance=AUTO)
    new_cells = compile_policy(new, sources, acceptance=AUTO)
    closed = old.get("acceptance") == AUTO and new.get("acceptance") != AUTO
    out: list[Affected] = []
    for mandate in mandates:
        if new_version and mandate.get("policy_version") == new_version:
            continue  # admitted under the new rules already: nothing changed for it
        facts = facts_of(mandate, kinds)
        before, after = gate(facts, old_cells), gate(facts, new_cells)
        reasons: list[str] = []
        if before.admitted and not after.admitted:
            if after.reason in (NOT_ALLOWED, BOT_NOT_LISTED):
                reasons.append(REQUESTER_INELIGIBLE)
            else:
                reasons.append(RULE_DISABLED)
        elif after.admitted and (before.rule, before.strength) != (after.rule, after.strength):
            reasons.append(RULE_CHANGED)
        if closed and mandate.get("strength") == INFERRED:
            reasons.append(ACCEPTANCE_CLOSED)
        if reasons:
            out.append(Affected(mandate.get("ticket"), tuple(reasons), before, after,
                                _message(reasons, mandate.get("rule") or "", new_version,
                                         before, after)))
    out.sort(key=lambda a: (a.ticket is None, a.ticket or 0))
    return out

