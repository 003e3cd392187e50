"""How much a usage report adds to a session's spend (pure; the guards of tickets read the
per-day sums this feeds, sessions/models.py UsageDay).

amux never sums usage into the session's own `usage`: that stays the runtime's latest
report. The daily record is the one place increases are added up, so a day's spend can be
told across sessions:

* a runtime that reports its own cumulative figure (Codex, Pi): the increase is the
  difference to the previous cumulative figure; the first figure, or one lower than the
  previous (the runtime started counting again, e.g. a new native session), counts whole;
* a runtime that reports only the latest model call (ACP, Claude): each call's `last`
  figure is the increase.
"""

from __future__ import annotations

from typing import Any


def total(block: Any, prefix: str = "") -> int | None:
    """A usage block's total tokens: its own total, else input + output."""
    if not isinstance(block, dict):
        return None
    value = block.get(f"{prefix}total_tokens")
    if isinstance(value, int):
        return value
    parts = [block.get(f"{prefix}input_tokens"), block.get(f"{prefix}output_tokens")]
    parts = [p for p in parts if isinstance(p, int)]
    return sum(parts) if parts else None


def cumulative_total(usage: dict[str, Any] | None) -> int | None:
    """The session's cumulative tokens as its runtime last reported them."""
    return total((usage or {}).get("cumulative"), "cumulative_")


def increase(previous: dict[str, Any] | None, report: dict[str, Any],
             native_cumulative: bool) -> int:
    """Tokens one `usage.observed` report adds, given the session's usage before it."""
    if native_cumulative:
        now = total(report.get("cumulative"), "cumulative_")
        if now is None:
            return 0  # a per-call figure of a runtime that also reports its cumulative one
        before = cumulative_total(previous)
        if before is None or now < before:
            return now
        return now - before
    return total(report.get("last")) or 0
