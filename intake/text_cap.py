"""How much inbound text amux keeps in a trigger or an input.

GitHub itself refuses a comment or an issue body longer than 65,536 characters, so no real
conversation needs more; anything longer (a pasted log, a forged payload) is cut, with a
marker saying how much was left out, so the agent and the people reading the ticket know
the text is incomplete. The raw delivery is stored once, whole, for audit.
"""

from __future__ import annotations

MAX_TEXT = 65_536


def cut_marker(left_out: int) -> str:
    return f"\n\n[… cut by amux: {left_out:,} more characters]"


def cap_text(text: str, limit: int = MAX_TEXT) -> str:
    """`text` unchanged when it fits in `limit` characters; otherwise its beginning and the
    marker, together exactly `limit` characters at most."""
    if len(text) <= limit:
        return text
    # The marker's length depends on the number it names, which depends on how much is
    # kept: size it for the largest count it can name, then fill up to the limit.
    kept = limit - len(cut_marker(len(text)))
    if kept <= 0:
        return text[:limit]
    return text[:kept] + cut_marker(len(text) - kept)
