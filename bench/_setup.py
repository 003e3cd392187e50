"""Shared set-up for the session benches: Django on a scratch PostgreSQL database of their
own (see _db.py: DATABASE_URL's server, else the embedded one), dropped when the process
exits, and Redis from REDIS_URL, else the embedded Redis of AMUX_DATA_DIR (var/bench)."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Benches lease runtime users from a pool of their own, never an installation's (a bench's
# scratch database hands out slot 1 again, and releasing a slot kills what runs as its uid),
# per checkout: two checkouts benching at once must not end each other's runtimes.
BENCH_POOL = f"amux-bench{zlib.crc32(str(ROOT).encode()) % 10000}"


def django_setup(database: str, data_dir: str = "var/bench") -> str:
    """Create scratch database `database`, point Django at it, migrate; return its URL."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench._db import scratch_database

    os.environ.setdefault("AMUX_DATA_DIR", str(ROOT / data_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")
    os.environ.setdefault("AMUX_RUNTIME_POOL", BENCH_POOL)
    stack = contextlib.ExitStack()
    url = stack.enter_context(scratch_database(database))
    atexit.register(_close_and_drop, stack)
    # a bench run on its own (python -m bench.<name>) leaves no runtime users either
    atexit.register(remove_runtime_users, os.environ["AMUX_RUNTIME_POOL"])
    os.environ["DATABASE_URL"] = url
    import django

    django.setup()
    from tests.support.isolation import reachable

    # a linux-dac runtime user passes through var/ to its state under var/bench (amux opens
    # only its data directory and below; var/ itself is made under umask 077)
    data = Path(os.environ["AMUX_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    reachable(data)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url


def _close_and_drop(stack: contextlib.ExitStack) -> None:
    with contextlib.suppress(Exception):
        from django.db import connections

        connections.close_all()
    stack.close()


def remove_runtime_users(pool: str) -> int:
    """Delete the OS users of the bench's own runtime pool, so a bench leaves no accounts
    behind (a run of the sessions bench alone makes hundreds)."""
    if pool != BENCH_POOL:
        return 0
    from runtimes.isolation import remove_pool

    return remove_pool(pool)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    if k == lo:  # exact (and never inf * 0 when a value is unbounded)
        return ordered[lo]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def figure(value: float | None, unit: str, goal: str, met: bool | None,
           note: str | None = None) -> dict:
    """One figure as every bench's figures() returns it."""
    out = {"value": None if value is None else round(float(value), 4), "unit": unit,
           "goal": goal, "met": met}
    if note:
        out["note"] = note
    return out
