"""Card callbacks (`card.action.trigger`): intake verifies them like every Lark event and
hands them to the one handler the conversations app registers here (intake never imports
conversations). A callback is answered at once with Lark's callback response — a toast
and optionally the updated card — and never stored as a raw delivery: a card form can hold
an answer that must not be kept (a sensitive one)."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

CARD_ACTION = "card.action.trigger"

# (source, verified schema 2.0 payload) -> the callback response body
Handler = Callable[[object, dict], dict]
_handler: Handler | None = None


def register(handler: Handler) -> None:
    """Called once from conversations' wiring: a second, different handler is an error
    (which app answers a card would depend on the order the apps start in)."""
    global _handler
    if _handler is not None and _handler is not handler:
        raise RuntimeError(f"card callbacks are handled already by {_handler!r}")
    _handler = handler


def toast(kind: str, content: str) -> dict:
    return {"toast": {"type": kind, "content": content}}


def answer(source, payload: dict) -> tuple[int, dict]:
    """(HTTP status, callback response) for one verified card callback. Always 200: any
    other status makes Lark deliver it again and show the person a failure."""
    if _handler is None:
        return 200, toast("error", "Card actions are not handled here.")
    try:
        return 200, _handler(source, payload)
    except Exception:  # the person gets a toast, not a broken card; the log has the why
        log.exception("card callback %s of %s failed",
                      (payload.get("header") or {}).get("event_id"), source)
        return 200, toast("error", "Something went wrong; nothing was changed. Try again.")
