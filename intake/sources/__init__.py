"""Source plugins, one module per kind (intake/sources/<kind>.py), and their registry."""

from __future__ import annotations

from intake.sources.base import SourceKind
from intake.sources.capabilities import (
    ChatPolling,
    DocumentPolling,
    OpensPullRequests,
    Polling,
    ReadsRepliesBack,
    RepliesInChat,
    SendsCards,
    declared,
    unimplemented,
)
from intake.sources.github import GitHub
from intake.sources.lark import Lark
from intake.sources.webchat import WebChat

__all__ = ["KINDS", "CapabilityMissing", "ChatPolling", "DocumentPolling", "OpensPullRequests",
           "Polling", "ReadsRepliesBack", "RepliesInChat", "SendsCards", "check_capabilities",
           "plugin"]

KINDS: dict[str, type[SourceKind]] = {k.kind: k for k in (GitHub, Lark, WebChat)}


class CapabilityMissing(TypeError):
    pass


def check_capabilities(kinds: dict[str, type[SourceKind]] | None = None) -> None:
    """Refuse to start with a plugin that declares a capability it does not implement."""
    for kind, cls in (kinds or KINDS).items():
        for capability in declared(cls):
            missing = unimplemented(cls, capability)
            if missing:
                raise CapabilityMissing(
                    f"source plugin {cls.__name__} ({kind!r}) declares {capability.__name__} "
                    f"but does not implement {', '.join(missing)}")


def plugin(kind: str, config: dict | None = None, secrets: dict | None = None,
           profile: dict | None = None) -> SourceKind:
    """An instance of the plugin of `kind` for one source's config and secrets (and, to
    translate events, its provider profile as verified)."""
    return KINDS[kind](config, secrets, profile)

