"""Source plugins, one module per kind (tickets/sources/<kind>.py)."""

from __future__ import annotations

from tickets.sources.base import SourceKind
from tickets.sources.github import GitHub
from tickets.sources.lark import Lark
from tickets.sources.webchat import WebChat

KINDS: dict[str, type[SourceKind]] = {k.kind: k for k in (GitHub, Lark, WebChat)}


def plugin(kind: str, config: dict | None = None, secrets: dict | None = None) -> SourceKind:
    """An instance of the plugin of `kind` for one source's config and secrets."""
    return KINDS[kind](config, secrets)
