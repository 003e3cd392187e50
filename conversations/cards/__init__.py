"""Lark cards (JSON 2.0) that conversations send: the turn card (turn.py, conv), the cards
of questions and permission requests (question.py, permission.py) and of goal states
(goal.py), each `render(payload, *, conversation_id, session_id, generation, lang) -> dict`.
Until a kind's module exists, `fallback.py` shows the event as plain text. Pure."""

from __future__ import annotations

LANGUAGES = ("en", "zh-CN")
FEISHU = "open.feishu.cn"


def language(config: dict | None) -> str:
    """The cards' language: the source's `language`, else zh-CN on Feishu's domain (the
    default domain), else en."""
    config = config or {}
    lang = config.get("language")
    if lang in LANGUAGES:
        return lang
    domain = config.get("domain") or f"https://{FEISHU}"
    return "zh-CN" if FEISHU in domain else "en"


def card(title: str, elements: list[dict], template: str = "blue") -> dict:
    """A JSON 2.0 card that can be updated in place (`update_multi`)."""
    return {"schema": "2.0", "config": {"update_multi": True},
            "header": {"title": {"tag": "plain_text", "content": title},
                       "template": template},
            "body": {"elements": elements}}


def markdown(text: str) -> dict:
    return {"tag": "markdown", "content": text}


def escape(text: str) -> str:
    """Text shown as typed inside a markdown element (no markup, links or mentions)."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "*_~`[]#":
        out = out.replace(ch, "\\" + ch)
    return out
