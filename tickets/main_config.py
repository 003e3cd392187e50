"""Whether the team has a main session, and with what (AgentSettings' main_* fields). With
none configured amux routes explicit requests by code (tickets/core/main_session.py)."""

from __future__ import annotations

from dataclasses import dataclass

from tickets.core import tokens
from tickets.models import AgentSettings, MainSession

# The main session acts only through amux's MCP tools: runtimes whose adapter takes MCP
# servers (runtimes/*.py `takes_mcp`; a test holds the two together). Pi takes none.
MAIN_RUNTIMES = ("codex", "claude", "acp")


@dataclass(frozen=True)
class MainConfig:
    runtime: str
    provider: str  # the provider profile's slug
    model: str


def current() -> MainConfig | None:
    row = AgentSettings.objects.select_related("main_provider").filter(pk=1).first()
    if row is None or not row.main_runtime or row.main_provider is None or not row.main_model:
        return None
    return MainConfig(row.main_runtime, row.main_provider.slug, row.main_model)


def configured() -> bool:
    return current() is not None


def describe() -> str:
    """One line for `amux doctor`, the panel and the docs: which router is in use."""
    config = current()
    if config is None:
        return ("deterministic routing: explicit requests open tickets by code (no main "
                "runtime configured)")
    return (f"main session on {config.runtime} ({config.provider}/{config.model}) routes "
            "explicit requests and hears follow-ups")


def session_for_token(token: str | None) -> int | None:
    """The main session this bearer token was issued to, or None."""
    if not tokens.looks_like_token(token):
        return None
    return (MainSession.objects.filter(pk=1, token_hash=tokens.token_hash(token),
                                       session__isnull=False)
            .values_list("session_id", flat=True).first())
