"""Building blocks of Lark card JSON 2.0 shared by the question and permission cards.

Text that comes from a runtime (a question, an option, a command) goes in `plain_text`
only: it can hold no markdown, link or mention that would render as ours."""

from __future__ import annotations

import json
import re
from typing import Any

from conversations.cards.words import word

TEXT_LIMIT = 2000  # characters of one runtime text on a card; Lark caps a card near 30 KB
OPEN_ID = re.compile(r"[A-Za-z0-9_-]{1,120}")


def clip(text: Any, limit: int = TEXT_LIMIT) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain(text: str) -> dict:
    return {"tag": "plain_text", "content": text}


def div(text: Any, limit: int = TEXT_LIMIT) -> dict:
    return {"tag": "div", "text": plain(clip(text, limit))}


def note(text: str) -> dict:
    """Our own words, in grey (never runtime text)."""
    return {"tag": "markdown", "content": text, "text_size": "notation"}


def mention(open_id: str) -> str:
    """A Lark mention of the operator, or a neutral word for an id we cannot place."""
    return f"<at id={open_id}></at>" if OPEN_ID.fullmatch(open_id or "") else "—"


def button(label: str, value: dict, *, style: str = "default", name: str = "",
           submit: bool = False) -> dict:
    out: dict[str, Any] = {"tag": "button", "text": plain(clip(label, 100)), "type": style,
                           "behaviors": [{"type": "callback", "value": value}]}
    if name:
        out["name"] = name
    if submit:
        out["form_action_type"] = "submit"
    return out


def card(title: str, template: str, elements: list[dict], subtitle: str = "") -> dict:
    header: dict[str, Any] = {"title": plain(clip(title, 100)), "template": template}
    if subtitle:
        header["subtitle"] = plain(clip(subtitle, 100))
    return {"schema": "2.0", "config": {"update_multi": True}, "header": header,
            "body": {"elements": elements}}


def released_words(lang: str, reason: str) -> str:
    """Why a card went inert: `turn` (its turn ended, was interrupted or the session
    closed), `stale` (the conversation moved on), anything else: no longer waiting."""
    return word(lang, f"released.{reason}" if reason in ("turn", "stale") else "released")


def action_value(kind: str, *, conversation_id: int, session_id: int, generation: int,
                 **extra) -> dict:
    """What every amux button carries back (INTERFACES.md "Card callbacks in")."""
    return {"amux": kind, "conversation": conversation_id, "session": session_id,
            "gen": generation, **extra}
