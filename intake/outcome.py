"""What became of one incoming message, in words (web chat shows it under each message).

The gate's decision and content-free reason, and the route it took (the trigger's
disposition), become one short sentence: admitted (and how) or ignored (and why)."""

from __future__ import annotations

from dataclasses import dataclass

from policy.document import GATE_REASON_WORDS

ROUTE_WORDS = {
    "admitted": "Admitted: a new ticket was opened for it.",
    "evaluating": "Admitted as a candidate: triage decides whether it becomes work.",
    "follow_up": "Admitted: added to the live ticket of this conversation.",
    "revive": "Admitted: the ended ticket of this conversation runs again.",
    "record": "Recorded on this conversation's ended ticket (it wakes nobody).",
    "handed_back": "Handed back: the agent decided it is not for it.",
    "routing": "Admitted: the team's main session is routing it.",
    "dismissed": "Not taken: the team's main session dismissed it.",
}


@dataclass(frozen=True)
class Outcome:
    admitted: bool
    text: str


def describe(decision: str, reason: str, disposition: str) -> Outcome | None:
    """None while the message is not decided yet (stored, waiting to be processed)."""
    if disposition == "not_accepted":
        return Outcome(False, "Not taken as work: it is an inferred candidate and acceptance "
                              "is manual.")
    if decision == "ignore" or disposition == "ignore":
        why = GATE_REASON_WORDS.get(reason) or (reason.replace("_", " ") if reason
                                                 else "no rule admits it")
        return Outcome(False, f"Ignored: {why}.")
    if disposition in ROUTE_WORDS:
        return Outcome(disposition not in ("handed_back", "dismissed"), ROUTE_WORDS[disposition])
    if decision:
        kind = "an explicit request" if decision == "explicit" else "an inferred candidate"
        return Outcome(True, f"Admitted as {kind}.")
    return None
