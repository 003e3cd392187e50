"""Shared set-up for the session benches: Django on the configured database and Redis
(DATABASE_URL / REDIS_URL, else SQLite and the embedded Redis under AMUX_DATA_DIR)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def django_setup(data_dir: str = "var/bench") -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("AMUX_DATA_DIR", str(ROOT / data_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
