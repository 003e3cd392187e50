"""The bounds of what the goals, agents, connectors, materials, inbox and turn APIs take.

A bound on a text that lands in a column is that column's width (a CharField) or its
``max_length`` (a TextField, which Django checks in validation, not in the database): the
model and the API read the same constant here.
"""

from __future__ import annotations

from amux_common.limits import KEY, SLUG

__all__ = ["KEY", "SLUG"]

POSITIVE_INT_MAX = 2**31 - 1   # a PositiveIntegerField column (quota, a material's max age)
GOAL_TITLE = 200
GOAL_DESCRIPTION = 20_000
CHECK_COMMAND = 2_000
TODO_TITLE = 300
TODO_EVIDENCE = 20_000
MATERIAL_TITLE = 200
MATERIAL_BODY = 1_000_000      # a fetched document, read by the agents
REF = 200                      # an owner-local id: a chat id, a document token
AGENT_NAME = 120
RUNTIME = 40
MODEL = 120
MESSAGE_TEXT = 100_000
SESSION_REF = 32
EFFECT_KEYS = 20               # a settled inbox item's effect: kind and a few ids
EFFECT_BYTES = 64 * 1024
