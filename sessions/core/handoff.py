"""What a new native conversation is told when the session's saved one is gone (the
runtime lost it: a deleted rollout, a missing session file). amux's own timeline still has
the conversation, so the first turn of the new one carries it, newest turns kept first
when it is longer than the bound, and says how many earlier turns were left out."""

from __future__ import annotations

from dataclasses import dataclass

LIMIT_CHARS = 24_000  # about 6k tokens: the gist of a long session, not all of it
EACH_CHARS = 4_000    # one input or reply longer than this is cut, and says so

HEADER = ("[amux] This session's earlier conversation could not be resumed: the runtime no "
          "longer has it, so this is a new conversation. What was said before, from amux's "
          "own record, oldest first:")
FOOTER = "[amux] End of the earlier conversation. The new message follows."


@dataclass(frozen=True)
class Exchange:
    said: str    # the turn's input
    replied: str  # the agent's messages in that turn ("" when it wrote none)


def _cut(text: str) -> str:
    text = text.strip()
    if len(text) <= EACH_CHARS:
        return text
    return text[:EACH_CHARS] + f" […{len(text) - EACH_CHARS} more characters not shown]"


def _block(n: int, exchange: Exchange) -> str:
    lines = [f"--- turn {n}", f"user: {_cut(exchange.said)}"]
    if exchange.replied.strip():
        lines.append(f"you: {_cut(exchange.replied)}")
    return "\n".join(lines)


def text(exchanges: list[Exchange], limit: int = LIMIT_CHARS) -> str | None:
    """The hand-off block for the new conversation's first turn; None when there was
    nothing before (a first turn has no conversation to lose)."""
    if not exchanges:
        return None
    blocks = [_block(n, e) for n, e in enumerate(exchanges, start=1)]
    kept: list[str] = []
    size = len(HEADER) + len(FOOTER)
    for block in reversed(blocks):  # the newest turns matter most for what comes next
        if kept and size + len(block) + 1 > limit:
            break
        kept.append(block)
        size += len(block) + 1
    kept.reverse()
    left_out = len(blocks) - len(kept)
    head = [HEADER]
    if left_out:
        head.append(f"({left_out} earlier turn{'s' if left_out > 1 else ''} left out for "
                    "length.)")
    return "\n".join([*head, *kept, FOOTER])
