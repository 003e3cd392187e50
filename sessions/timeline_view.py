"""How one timeline event shows on the session page: where it goes and what it says.

The page is built in the browser from the same ordered events the websocket sends
(``static/sessions/timeline.js`` places each fragment), so a reload, a reconnect and a live
view all apply the same events the same way. Each event's fragment says where it goes
(``place``):

* ``turn`` — a turn's block, opened by its ``turn.queued`` (with the input);
* ``item`` — a new item of its turn (a tool call, a question, an error), or the item of the
  same ``key`` replaced;
* ``stream`` — text appended to the open block of the same stream and ``key`` (message
  deltas, reasoning chunks), a new block if there is none;
* ``final`` — the completed message, in place of its open stream block: shown once;
* ``patch`` — parts of an existing item (``key``) or of the turn itself (``key`` "turn")
  replaced: a tool's status and output, a turn's state and usage, an answered question;
* ``note`` — a session-level event outside any turn.
"""

from __future__ import annotations

import json
from typing import Any

from amux_common.markdown import to_html

# The raw view shows a payload up to this many characters; the API's timeline has it whole.
RAW_LIMIT = 4000
# A tool's output on the page, the same way.
OUTPUT_LIMIT = 20000

TERMINALS = {"turn.completed": "completed", "turn.failed": "failed",
             "turn.cancelled": "cancelled"}
PATCHES = {"turn.started", *TERMINALS, "usage.observed", "tool.updated", "tool.completed",
           "permission.answered", "question.answered"}
ITEMS = {"tool.started", "permission.requested", "question.asked", "error"}


def clipped(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters, and how many were left out."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def place_of(event: dict[str, Any]) -> str:
    kind = event["type"]
    if kind == "turn.queued":
        return "turn"
    if kind in ("permission.answered", "question.answered"):
        return "patch"  # an async question is answered after its turn, outside any
    if event.get("turn") is None:
        return "note"
    if kind in ("message.delta", "reasoning"):
        return "stream"
    if kind == "message.completed":
        return "final"
    if kind in PATCHES:
        return "patch"
    return "item"


def key_of(event: dict[str, Any]) -> str:
    p, kind = event.get("payload") or {}, event["type"]
    if kind in ("turn.started", "usage.observed", *TERMINALS):
        return "turn"
    if kind.startswith("tool."):
        return f"tool:{p.get('call_id') or ''}"
    if kind.startswith(("permission.", "question.")):
        return f"request:{p.get('request_id') or ''}"
    if kind.startswith("message.") or kind == "reasoning":
        return str(p.get("item_id") or "")
    return ""


def usage_figures(p: dict[str, Any]) -> list[tuple[str, int | str]]:
    """What a usage report says, as (label, number) pairs: only the figures it has."""
    out: list[tuple[str, int | str]] = []
    last = p.get("last") if isinstance(p.get("last"), dict) else {}
    for label, field in (("in", "input_tokens"), ("out", "output_tokens"),
                         ("cached", "cached_input_tokens")):
        if isinstance(last.get(field), int) and (last[field] or field != "cached_input_tokens"):
            out.append((f"last call {label}", last[field]))
    cumulative = p.get("cumulative") if isinstance(p.get("cumulative"), dict) else {}
    total = cumulative.get("cumulative_total_tokens")
    if not isinstance(total, int):
        parts = [cumulative.get(f"cumulative_{f}") for f in ("input_tokens", "output_tokens")]
        total = sum(v for v in parts if isinstance(v, int)) if any(
            isinstance(v, int) for v in parts) else None
    if isinstance(total, int):
        out.append(("session total", total))
    if isinstance(p.get("context_used"), int):
        window = p.get("context_window")
        out.append(("context", f"{p['context_used']:,}" + (
            f" / {window:,}" if isinstance(window, int) else "")))
    cost = p.get("cost") if isinstance(p.get("cost"), dict) else {}
    if isinstance(cost.get("amount"), int | float):
        out.append(("cost", f"{'~' if cost.get('estimate') else ''}{cost['amount']:.4f} "
                            f"{cost.get('currency') or ''}".strip()))
    return [(label, f"{v:,}" if isinstance(v, int) else v) for label, v in out]


def context(event: dict[str, Any], session_id: int) -> dict[str, Any]:
    """The template context of one event's fragment (``sessions/_event.html``)."""
    p = event.get("payload") or {}
    raw, raw_left = clipped(json.dumps(p, indent=1, ensure_ascii=False), RAW_LIMIT)
    ctx: dict[str, Any] = {"e": event, "p": p, "sid": session_id, "place": place_of(event),
                           "key": key_of(event), "raw": raw, "raw_left": raw_left,
                           "label": event["type"].replace(".", " ").replace("_", " ")}
    kind = event["type"]
    if kind == "message.completed":
        ctx["html"] = to_html(p.get("text") or "")
    elif kind in ("tool.started", "tool.updated", "tool.completed"):
        shown = p.get("input") if kind == "tool.started" else p.get("output")
        if isinstance(shown, dict) and isinstance(shown.get("command"), str):
            shown = shown["command"]  # a shell call: its command says it all
        ctx["text"], ctx["text_left"] = clipped(as_text(shown), OUTPUT_LIMIT)
    elif kind == "usage.observed":
        ctx["figures"] = usage_figures(p)
    elif kind in TERMINALS:
        ctx["state"] = TERMINALS[kind]
    return ctx
