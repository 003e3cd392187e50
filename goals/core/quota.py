"""A goal's quota in turns or tokens: spent only after an accepted writeback (later turns
call ``spend``)."""

from __future__ import annotations

from goals.core.lifecycle import Refused

UNITS = ("turns", "tokens")


def check(unit: str, limit: int, spent: int) -> None:
    if unit not in UNITS:
        raise Refused(f"quota.unit must be one of {', '.join(UNITS)}", code="invalid",
                      status=400, field="quota")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise Refused("quota.limit must be a whole number, 0 or more", code="invalid",
                      status=400, field="quota")
    if limit < spent:
        raise Refused(f"quota.limit cannot go under what is already spent ({spent})",
                      code="invalid", status=400, field="quota")


def remaining(limit: int, spent: int) -> int:
    return max(0, limit - spent)


def spend(limit: int, spent: int, amount: int) -> int:
    """The new spent amount; refused when it would pass the limit."""
    if amount < 0:
        raise Refused("a spend is never negative", code="invalid", status=400, field="amount")
    if spent + amount > limit:
        raise Refused("the goal's quota is exhausted", code="quota_exhausted")
    return spent + amount
