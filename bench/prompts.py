"""How much a model request pays to read its system prompt (`prompts_app.service.current`).

Every model request calls `current(role)`: one query for the latest version, the built-in
files read and hashed, and the pure assembly. This prints, measured in one run, the cost of
each piece relative to one trivial database round trip, and the cost of a request with a
large team configuration relative to one with nothing written.

    python -m bench.prompts      (on a scratch database, amux_bench_prompts)
"""

from __future__ import annotations

import time

N = 2000


def per_call(fn, n=N) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def select_one():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def main() -> dict[str, float]:
    from bench._setup import django_setup

    django_setup("amux_bench_prompts")
    from django.db import connection

    from prompts_app import assembly, library, service
    from prompts_app.models import PromptVersion

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
    return {"empty": empty / roundtrip, "full": full / roundtrip}


def figures() -> dict[str, dict]:
    from bench._setup import figure

    result = main()
    return {"prompt_current_roundtrips": figure(
        result["full"], "x SELECT 1", "-", None,
        f"a request's system prompt with a large team configuration, in database round "
        f"trips (nothing written: {result['empty']:.1f})")}


if __name__ == "__main__":
    main()
