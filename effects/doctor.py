"""`amux doctor` lines of the outbox: one line per effect kind that has rows (due, running,
waiting, dead letters, oldest age), or one line saying it is empty. A dead letter or a kind
no process here handles is a warning: work waits for an operator, nothing is broken."""

from __future__ import annotations

from collections.abc import Iterator

from amux_common.doctor import Check
from effects import outbox, stats


def _lines() -> list[Check]:
    counts = stats.by_kind()
    if not counts:
        return [Check("outbox", True, "empty", required=False)]
    handled = outbox.handlers()
    lines = []
    for kind in counts:
        detail = kind.describe()
        ok = kind.dead == 0
        if kind.dead:
            detail += " (retry them from Admin → Effects once their cause is fixed)"
        if kind.pending and kind.kind not in handled:
            ok = False
            detail += " (no handler in this installation: these wait)"
        lines.append(Check(f"outbox:{kind.kind}", ok, detail, required=False))
    return lines


def checks() -> Iterator[Check]:
    yield from _lines()
