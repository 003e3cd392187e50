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
)
from .events import TurnInput
from .registry import get_adapter, registered
from .watchdog import WatchdogConfig

__all__ = ["Capabilities", "Probe", "ProviderSpec", "RuntimeAdapter", "RuntimeConfig",
           "TurnInput", "WatchdogConfig", "get_adapter", "registered"]
