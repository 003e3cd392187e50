"""The runtimes amux knows, declared: each adapter by its name. This module sits above the
adapters (they never import it), so looking one up needs no start-up registration and no
import cycle."""

from __future__ import annotations

from . import codex_shared, errors
from .acp import AcpAdapter
from .base import RuntimeAdapter
from .claude import ClaudeAdapter
from .codex import CodexAdapter
from .codex_attached import CodexAttachedAdapter
from .pi import PiAdapter


def _by_name(*adapters: type[RuntimeAdapter]) -> dict[str, type[RuntimeAdapter]]:
    named = {cls.name: cls for cls in adapters}
    if len(named) != len(adapters):
        raise ValueError(f"two runtimes share a name: {[cls.name for cls in adapters]}")
    return named


# the runtimes amux launches, offers, probes and starts
ADAPTERS = _by_name(AcpAdapter, ClaudeAdapter, CodexAdapter, PiAdapter)
# adapters that drive a runtime amux does not launch (an attached app-server): found by
# name for the sessions that use them, but no runtime to offer, probe or start
UNLISTED = _by_name(CodexAttachedAdapter)


def get_adapter(name: str) -> type[RuntimeAdapter]:
    try:
        return ADAPTERS.get(name) or UNLISTED[name]
    except KeyError:
        raise errors.UnknownRuntime(
            f"unknown runtime {name!r} (known: {', '.join(sorted(ADAPTERS))})") from None


# a Codex session that is a thread of a shared app-server (CodexAdapter picks it itself)
SHARED = (codex_shared.CodexSharedAdapter,)


def registered() -> dict[str, type[RuntimeAdapter]]:
    return dict(ADAPTERS)
