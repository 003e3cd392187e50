"""`amux doctor`'s line on who routes explicit requests: the team's main session (a
runtime configured in the agent settings) or amux's deterministic routing, the fallback."""

from __future__ import annotations

from amux_common.doctor import Check, Probe
from tickets import main_config


def checks():
    yield Probe("router", lambda: Check("router", True, main_config.describe(),
                                        required=False), required=False)
