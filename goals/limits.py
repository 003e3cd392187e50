"""The bounds of what the goals, connectors, materials, inbox and turn APIs take."""

from __future__ import annotations

from amux_common.limits import SLUG

__all__ = ["SLUG"]

POSITIVE_INT_MAX = 2**31 - 1   # a PositiveIntegerField column (quota, a material's max age)
EFFECT_KEYS = 20               # a settled inbox item's effect: kind and a few ids
EFFECT_BYTES = 64 * 1024
