"""Which isolation backend new runtime launches use (the settings' word, or the automatic
choice: linux-dac when amux runs as root) and how doctor describes it. The backends
themselves: ``sessions.runtimes.isolation``."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from sessions.runtimes import isolation


def selected_backend() -> str:
    """``private-home`` or ``linux-dac``: AMUX_ISOLATION when set, else automatic."""
    return settings.AMUX_ISOLATION or isolation.auto_backend()


def runtime_user() -> str:
    return settings.AMUX_RUNTIME_USER


def status() -> dict[str, Any]:
    """The backend new sessions get, and (linux-dac) whether its runtime user exists."""
    return isolation.describe(selected_backend(), runtime_user())


def provision() -> dict[str, Any]:
    """Create the runtime user when the selected backend needs it (idempotent)."""
    if selected_backend() == isolation.LINUX_DAC:
        isolation.provision(runtime_user())
    return status()
