"""From a signed GitHub comment to the worker's first turn started, with 20 tickets opened
within a minute (goal on this machine: p50 < 1 s, p95 < 2 s), on amux's real processes.

The processes are those `amux run` starts: uvicorn serving the web app, a Celery `default`
worker, a `runtime` worker with `amux run`'s process count, and beat — on a scratch
PostgreSQL database and a data directory of their own. The repository (--files files of
about 2 KiB) is served by a real smart-HTTP git server and is mirrored by a first ticket
(not measured). Then --tickets signed `issue_comment` webhooks ("@amux-bot please fix …"),
each on a new issue, are sent evenly over --within seconds; each is stored, answered, and
admitted off-request by the intake drainer the commit wakes; the
outbox's dispatch fetches the mirror, clones the ticket's directory, creates the worker
session and posts its brief, and a session host starts the real runtime and opens the turn.
The figure is the wall time from sending the webhook to the turn's `started_at`; the model
is the scripted server answering at once. Sessions keep their default idle timeout, so an
awake session holds whatever it holds until it falls asleep: that is what is measured.

A ticket whose turn has not started --wait seconds after the last comment is counted as
not started; a percentile that falls on one is not measured (reported as "over N s").

    python -m bench.first_action [--tickets 20] [--within 60] [--wait 90] [--files 400]
                                 [--runtime codex|pi]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench._setup import django_setup, percentile

GOAL_P50_MS, GOAL_P95_MS = 1000, 2000


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--tickets", type=int, default=20)
    p.add_argument("--within", type=float, default=60, help="seconds the comments span")
    p.add_argument("--wait", type=float, default=90,
                   help="seconds after the last comment before a ticket counts as not started")
    p.add_argument("--files", type=int, default=400,
                   help="files in the repository (about 2 KiB each)")
    p.add_argument("--runtime", default="codex", choices=["codex", "pi"])
    return p


def run(args) -> dict:
    data = Path(tempfile.mkdtemp(prefix="bench-first-action-"))
    os.environ["AMUX_DATA_DIR"] = str(data)  # from nothing: its own mirrors and work dirs
    own_redis = not os.environ.get("REDIS_URL")
    try:
        django_setup("amux_bench_first_action")
        return _run(args, data)
    finally:
        if own_redis:
            from amux_site import embedded_redis

            embedded_redis.stop(data)
        shutil.rmtree(data, ignore_errors=True)


def _run(args, data: Path) -> dict:
    from django.conf import settings

    from bench._cluster import mirrored_cluster

    with mirrored_cluster(data, args.runtime, args.files) as bench:
        sent: dict[int, float] = {}
        gap = args.within / max(1, args.tickets - 1) if args.tickets > 1 else 0
        first = time.monotonic()
        for i in range(args.tickets):
            time.sleep(max(0.0, first + i * gap - time.monotonic()))
            sent[100 + i] = bench.send(100 + i)
        spread = time.monotonic() - first
        began = bench.wait_started(list(sent), args.wait)
    waits = sorted((began[n] - sent[n]) * 1000 if n in began else math.inf for n in sent)
    late = sum(1 for w in waits if math.isinf(w))
    print(f"runtime={args.runtime} tickets={args.tickets} sent over {spread:.0f} s, "
          f"repository={args.files} files, runtime worker processes "
          f"{settings.AMUX_SESSION_CAPACITY}")
    result = {"tickets": len(waits), "not_started": late, "spread": spread, "wait": args.wait}
    for p in (50, 95):
        value = percentile(waits, p)
        result[f"p{p}"] = None if math.isinf(value) or math.isnan(value) else value
    started_ms = [w for w in waits if not math.isinf(w)]
    print(f"comment -> first turn started: p50 {_ms(result['p50'], args.wait)}, "
          f"p95 {_ms(result['p95'], args.wait)} (goal p50 < {GOAL_P50_MS}, p95 < "
          f"{GOAL_P95_MS}); started {len(started_ms)} of {len(waits)}"
          + (f", fastest {min(started_ms):.0f} ms, slowest {max(started_ms):.0f} ms"
             if started_ms else ""), flush=True)
    return result


def _ms(value: float | None, wait: float) -> str:
    return f"over {wait:.0f} s" if value is None else f"{value:.0f} ms"


def figures() -> dict[str, dict]:
    from bench._setup import figure

    result = run(parser().parse_args([]))
    note = (f"{result['tickets']} tickets over {result['spread']:.0f} s; "
            f"{result['not_started']} had not started {result['wait']:.0f} s after the last")
    out = {}
    for p, goal in ((50, GOAL_P50_MS), (95, GOAL_P95_MS)):
        value = result[f"p{p}"]
        if value is None:
            out[f"first_action_p{p}_ms"] = figure(
                None, "ms", f"< {goal}", False,
                f"over {result['wait']:.0f} s after the last comment: {note}")
        else:
            out[f"first_action_p{p}_ms"] = figure(value, "ms", f"< {goal}", value < goal, note)
    return out


if __name__ == "__main__":
    run(parser().parse_args())
