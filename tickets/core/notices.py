"""Where a ticket's final notice goes (pure).

A notice goes where the request came from: the chat thread that asked (Lark, web chat),
else the notice channel its source names (`notice_channel`: `<chat source slug>:<chat id>`).
A GitHub-only ticket with neither gets no notice: its pull request shows the result.
"""

from __future__ import annotations

import re

from intake.sources.base import NOTICE_CHANNEL

CHAT_KINDS = ("lark", "webchat")


def parse_notice_channel(value) -> tuple[str, str] | None:
    """`(source slug, address)` of a configured notice channel, or None when unset or
    malformed (the source's config validation refuses malformed values on save)."""
    if not isinstance(value, str) or not re.fullmatch(NOTICE_CHANNEL, value.strip()):
        return None
    slug, address = value.strip().split(":", 1)
    return slug, address


def result_text(title: str, end_reason: str, pr_state: str, thread_url: str,
                pr_url: str) -> str:
    """The one notice of a ticket's final result, in a sentence with its link."""
    if end_reason == "issue_closed":
        return f"{title}: issue closed. {thread_url}".strip()
    verb = "merged" if pr_state == "merged" else "closed without merging"
    return f"{title}: pull request {verb}. {pr_url}".strip()
