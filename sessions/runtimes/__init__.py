"""Runtime adapters (pure Python, importable without Django).

``get_adapter(name)`` returns the adapter class registered under ``name``;
``registered()`` lists them all.
"""

from __future__ import annotations

from .base import (
    Capabilities,
    Probe,
    ProviderSpec,
    RuntimeAdapter,
    RuntimeConfig,
    get_adapter,
    registered,
)
from .events import TurnInput
from .watchdog import WatchdogConfig

_loaded = False


def load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import acp, claude, codex, codex_attached, pi  # noqa: F401 - registration side effect


__all__ = ["Capabilities", "Probe", "ProviderSpec", "RuntimeAdapter", "RuntimeConfig",
           "TurnInput", "WatchdogConfig", "get_adapter", "load_builtin", "registered"]
