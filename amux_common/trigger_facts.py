"""The facts of one trigger, one type from the source plugin to the gate to the Trigger row.

A plugin translates an event into `TriggerFacts` (intake/sources/); the gate sees only its
view of them, derived in one place (`policy.gate.Facts.of`: no text, no ids); intake
stores them as the Trigger's columns, derived in one place (`intake.rules.trigger_fields`).
A stored Trigger has the same field names, so the gate's view of it is derived the same
way. Pure: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TriggerFacts:
    """An event translated into a trigger: who, where, whether the agent was addressed,
    what was said. `meta` keeps what the source needs later (`own_message` when the
    agent wrote it itself); `facts` are the thread's own state reported alongside (e.g.
    {"pr_state": "merged"}), for the consumer of the thread."""

    external_id: str
    thread: str
    scope: str
    actor: str = ""
    is_human: bool = True
    is_bot: bool = False
    addressed: bool = False
    receives_all: bool = False
    text: str = ""
    thread_title: str = ""
    thread_url: str = ""
    meta: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    # Set when the source itself refuses the trigger before any policy applies (a mention
    # of a bot whose identity is not verified): kept as an ignored trigger with this reason.
    refusal: str = ""
