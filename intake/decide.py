"""The one place intake asks the gate (policy/gate.py) about an incoming trigger."""

from __future__ import annotations

from amux_common.trigger_facts import TriggerFacts
from policy import services
from policy.gate import Facts, gate


def decide_incoming(source, facts: TriggerFacts, version: str | None = None) -> dict:
    """The gate's decision under the current version (compiled once per version;
    ``version`` when intake read it with the source). Intake stores the answer on the
    trigger and its consumer routes it in the same transaction."""
    policy = services.current_policy({source.slug: source.kind}, version=version)
    if facts.refusal:  # the source refused it: no policy cell can admit it
        return {"decision": "ignore", "strength": None, "rule": None,
                "reason": facts.refusal, "version": policy.version,
                "acceptance": policy.acceptance}
    verdict = gate(Facts.of(source.slug, source.kind, facts), policy)
    return {"decision": verdict.decision, "strength": verdict.strength, "rule": verdict.rule,
            "reason": verdict.reason, "version": policy.version,
            "acceptance": policy.acceptance}


def current_version_query():
    """The current policy version as a subquery (read with the source on each delivery)."""
    return services.current_version_query()


def current_version() -> str:
    """The current policy version's hash ('' for none yet), read once per batch."""
    return services.current_version()
