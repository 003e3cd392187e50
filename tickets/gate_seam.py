"""The one place intake asks the policy for a decision (connected when the gate lands).

`decide(source, facts)` answers `{"decision", "strength", "rule", "reason", "version"}`
or None; with None the trigger is stored with its facts and empty decision fields, for
the gate to fill. Intake writes no decision of its own.
"""

from __future__ import annotations


def decide(source, facts) -> dict | None:
    return None
