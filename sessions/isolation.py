"""Which isolation backend launches a session's runtime (seed 000: `private-home`, or
`linux-dac` when amux runs as root). Recorded in the frozen execution snapshot.

One function on purpose: the backends themselves (and the automatic choice) live with the
launch environment; this is the single place the execution snapshot asks."""

from __future__ import annotations

PRIVATE_HOME = "private-home"
LINUX_DAC = "linux-dac"


def selected_backend() -> str:
    """The backend a new session is launched under (today: its private HOME)."""
    return PRIVATE_HOME
