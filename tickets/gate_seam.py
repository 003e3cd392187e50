"""The one place intake asks the policy for a decision.

`decide(source, facts)` answers `{"decision", "strength", "rule", "reason", "version"}`:
the gate (policy/gate.py, pure) under the current policy version, compiled once per
version (policy.services.current_policy). Intake stores it on the trigger; a decided
trigger is then routed by the engine (route_trigger) after commit.
"""

from __future__ import annotations

from policy import services
from policy.gate import Facts, gate


def decide(source, facts) -> dict | None:
    policy = services.current_policy()
    verdict = gate(
        Facts(source=source.slug, kind=source.kind, scope=facts.scope, actor=facts.actor,
              is_human=facts.is_human, is_bot=facts.is_bot, addressed=facts.addressed,
              receives_all=facts.receives_all, is_self=bool(facts.meta.get("own_message"))),
        policy,
    )
    return {"decision": verdict.decision, "strength": verdict.strength, "rule": verdict.rule,
            "reason": verdict.reason, "version": policy.version}
