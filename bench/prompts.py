"""How much a model request pays to read its system prompt (`prompts_app.service.current`).

Every model request calls `current(role)`: one query for the latest version, the built-in
files read and hashed, and the pure assembly. This prints, measured in one run, the cost of
each piece relative to one trivial database round trip, and the cost of a request with a
large team configuration relative to one with nothing written.

    AMUX_DATA_DIR=/tmp/amux-bench python bench/prompts.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from prompts_app import assembly, library, service  # noqa: E402
from prompts_app.models import PromptVersion  # noqa: E402

N = 2000


def per_call(fn, n=N) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def select_one():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def main():
    call_command("migrate", verbosity=0)
    PromptVersion.objects.all()._raw_delete(PromptVersion.objects.db)
    defaults = library.load()
    roundtrip = per_call(select_one)
    empty = per_call(lambda: service.current("worker", policy="p"))
    base = service.latest_revision()
    for i in range(20):
        base = service.save(f"skill.s{i}", "x" * 5000, base, origin="tool").revision
    base = service.save("team.about", "We build amux. " * 300, base, origin="tool").revision
    head = PromptVersion.objects.order_by("-revision").first()
    full = per_call(lambda: service.current("worker", policy="p"))
    files = per_call(library.load)
    pure = per_call(lambda: assembly.assemble("worker", head.config, defaults, "p"))
    size = len(service.current("worker", policy="p").text)
    print(f"database: {connection.vendor}")
    print(f"current(), nothing written   / SELECT 1 round trip: {empty / roundtrip:6.1f}x")
    print(f"current(), {size // 1000}k-char prompt  / SELECT 1 round trip: "
          f"{full / roundtrip:6.1f}x")
    print(f"  of which reading+hashing built-in files: {files / full:6.1%}")
    print(f"  of which pure assembly:                  {pure / full:6.1%}")
    print(f"large configuration / nothing written:     {full / empty:6.1f}x")
    PromptVersion.objects.all()._raw_delete(PromptVersion.objects.db)


if __name__ == "__main__":
    main()
