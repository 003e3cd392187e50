"""The default number of sessions one runtime worker keeps awake: sized by memory.

An awake session costs its runtime's processes (a Node or Rust program: about 34 MB for a
Codex app-server of its own, 6-11 MB for a thread of a shared one under private-home,
110 MB for Pi's Node, counted as PSS by bench/sessions.py, plus whatever tools it runs)
and a few MB in the host (a thread, its event loop, a database and a Redis connection).
Three quarters of the memory available when the worker starts, divided by that
cost, leaves room for the web server, the other workers and the page cache.
"""

from __future__ import annotations

from pathlib import Path

SHARE = 0.75
MAX = 256  # threads and file descriptors of one process stay reasonable


def available_mb(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """MemAvailable in MB, or None where /proc/meminfo is not there (not Linux)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def from_memory(per_session_mb: int, available: int | None = None) -> int:
    available = available if available is not None else available_mb()
    if available is None:
        return 8
    return max(1, min(MAX, int(available * SHARE // max(1, per_session_mb))))
