"""Lark cards (card JSON 2.0) that amux sends into conversations."""

from __future__ import annotations

LANGUAGES = ("en", "zh-CN")


def language(config: dict) -> str:
    """The card language of a Lark source: its `language` key (`en` | `zh-CN`); when
    unset, Simplified Chinese for a Feishu domain, else English."""
    lang = (config or {}).get("language")
    if lang in LANGUAGES:
        return lang
    return "zh-CN" if "open.feishu.cn" in str((config or {}).get("domain") or "") else "en"
