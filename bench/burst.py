"""Ten requests at once: 10 signed comments on 10 new issues of one already-mirrored
repository, sent within one second, to each worker's first turn started (p50, p95, max),
for Codex and for Pi, on amux's real processes (bench/_cluster.py) — a team labelling
issues after a planning meeting.

Beside it, in the same run and on the same machine, the floor: the same 10 runtimes
(the same adapters, isolation and scripted model) started directly in parallel, without
amux, each measured from the common start to the moment its first turn is given (its
`start()` returned: the runtime process is up and has its conversation). The figures:
`first_action_burst_p95_ms_<runtime>` and `first_action_burst_ratio_<runtime>`, amux's
p95 over the floor's p95 (goals: ratio <= 1.3 for both runtimes, p95 < 3 s for Codex).
The floor runs first, then amux's burst; each burst's workers are put to sleep before the
next runtime's, so one runtime's processes never compete with the other's.

    python -m bench.burst [--requests 10] [--runtime all|codex|pi] [--files 400] [--wait 120]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench._setup import django_setup, figure, percentile

RUNTIMES = ("codex", "pi")
GOAL_RATIO = 1.3
GOAL_P95_MS = {"codex": 3000}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=10)
    p.add_argument("--runtime", default="all", choices=["all", *RUNTIMES])
    p.add_argument("--files", type=int, default=400,
                   help="files in the repository (about 2 KiB each)")
    p.add_argument("--wait", type=float, default=120,
                   help="seconds after the burst before a worker counts as not started")
    return p


def run(args) -> dict[str, dict]:
    data = Path(tempfile.mkdtemp(prefix="bench-burst-"))
    os.environ["AMUX_DATA_DIR"] = str(data)  # from nothing: its own mirrors and work dirs
    own_redis = not os.environ.get("REDIS_URL")
    runtimes = RUNTIMES if args.runtime == "all" else (args.runtime,)
    try:
        django_setup("amux_bench_burst")
        return _run(args, data, runtimes)
    finally:
        if own_redis:
            from amux_site import embedded_redis

            embedded_redis.stop(data)
        shutil.rmtree(data, ignore_errors=True)


def _run(args, data: Path, runtimes) -> dict[str, dict]:
    from bench._cluster import mirrored_cluster

    out: dict[str, dict] = {}
    number = 100
    with mirrored_cluster(data, runtimes[0], args.files) as bench:
        for runtime in runtimes:
            load = os.getloadavg()[0]
            floor = asyncio.run(_floor(runtime, args.requests, bench.model.base_url, data))
            bench.use_runtime(runtime)
            numbers = list(range(number, number + args.requests))
            number += args.requests
            with ThreadPoolExecutor(args.requests) as pool:  # all within the same second
                began = time.monotonic()
                sent = dict(zip(numbers, pool.map(bench.send, numbers), strict=True))
                spread = time.monotonic() - began
            opened = bench.wait_started(numbers, args.wait)
            bench.sleep_workers(numbers)
            waits = sorted((opened[n] - sent[n]) * 1000 if n in opened else math.inf
                           for n in numbers)
            out.update(_figures(runtime, waits, floor, spread, load, args))
    return out


async def _floor(runtime: str, count: int, model_url: str, data: Path) -> list[float]:
    """The same runtimes started directly, in parallel: ms from the common start until
    each is given its first turn; then each runs that turn, as amux's workers do."""
    from tests.support.runtimes import adapter_for, collect, make_config

    adapters = [adapter_for(runtime, make_config(
        runtime, Path(tempfile.mkdtemp(prefix=f"floor-{i}-", dir=data)), model_url))
        for i in range(count)]
    began = time.monotonic()

    async def one(i: int, adapter) -> float:
        await adapter.start()
        given = (time.monotonic() - began) * 1000
        await collect(adapter, f"please fix crash {i}")
        return given

    try:
        return sorted(await asyncio.gather(*(one(i, a) for i, a in enumerate(adapters))))
    finally:
        for adapter in adapters:
            with contextlib.suppress(Exception):  # one close failing leaves the others to close
                await adapter.close()


def _figures(runtime: str, waits: list[float], floor: list[float], spread: float,
             load: float, args) -> dict[str, dict]:
    started = [w for w in waits if not math.isinf(w)]
    p50, p95 = percentile(waits, 50), percentile(waits, 95)
    f50, f95 = percentile(floor, 50), percentile(floor, 95)
    note = (f"{args.requests} comments sent within {spread * 1000:.0f} ms; started "
            f"{len(started)} of {len(waits)}; amux p50 {_ms(p50)}, max {_ms(max(waits))}; "
            f"floor p50 {f50:.0f} ms, p95 {f95:.0f} ms, max {max(floor):.0f} ms; "
            f"load {load:.2f} on {os.cpu_count()} cores")
    print(f"runtime={runtime}: {note}", flush=True)
    goal = GOAL_P95_MS.get(runtime)
    if math.isinf(p95):
        return {f"first_action_burst_p95_ms_{runtime}": figure(
                    None, "ms", f"< {goal}" if goal else "-", None,
                    f"not measured: over {args.wait:.0f} s; {note}"),
                f"first_action_burst_ratio_{runtime}": figure(
                    None, "x", f"<= {GOAL_RATIO}", None, "not measured: p95 unbounded")}
    ratio = p95 / f95
    return {f"first_action_burst_p95_ms_{runtime}": figure(
                p95, "ms", f"< {goal}" if goal else "-", p95 < goal if goal else None, note),
            f"first_action_burst_ratio_{runtime}": figure(
                ratio, "x", f"<= {GOAL_RATIO}", ratio <= GOAL_RATIO,
                "amux's p95 over the floor's p95, same run")}


def _ms(value: float) -> str:
    return "not started" if math.isinf(value) else f"{value:.0f} ms"


def figures() -> dict[str, dict]:
    return run(parser().parse_args([]))


if __name__ == "__main__":
    for name, fig in run(parser().parse_args()).items():
        print(f"{name}: {fig}")
