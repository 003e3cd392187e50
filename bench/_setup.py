"""Shared set-up for the session benches: Django on a scratch PostgreSQL database of their
own (see _db.py: DATABASE_URL's server, else the embedded one), dropped when the process
exits, and Redis from REDIS_URL, else the embedded Redis of AMUX_DATA_DIR (var/bench)."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Benches lease runtime users from a pool of their own, never an installation's (a bench's
# scratch database hands out slot 1 again, and releasing a slot kills what runs as its uid).
BENCH_POOL = "amux-bench"


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
    """Delete the OS users (and their groups) of a bench's runtime pool, so a bench leaves
    no accounts behind: system ids are few (about 900), and a run of the sessions bench
    alone makes hundreds. Only as root, and only the bench's own pool."""
    if pool != BENCH_POOL or os.geteuid() != 0:
        return 0
    import pwd
    import re
    import shutil
    import subprocess

    userdel, pkill = shutil.which("userdel"), shutil.which("pkill")
    if userdel is None:
        return 0
    mine = re.compile(rf"{re.escape(pool)}-(\d+|app)")
    removed = 0
    for entry in pwd.getpwall():
        if not mine.fullmatch(entry.pw_name):
            continue
        if pkill:  # a runtime a stopped worker left behind keeps its user
            subprocess.run([pkill, "-KILL", "-u", entry.pw_name], capture_output=True)
        done = subprocess.run([userdel, entry.pw_name], capture_output=True)
        removed += done.returncode == 0
    return removed


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
