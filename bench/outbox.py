"""How fast the outbox moves effects, against the limit of its table.

    python -m bench.outbox [N]

Creates its own database (amux_bench_outbox on DATABASE_URL's server or the embedded one,
dropped after), then for 1 and 4 processes:
- outbox: N effects enqueued with `outbox.enqueue` (one transaction each), then drained by
  `outbox.drain()` with a no-op handler until the table is empty;
- limit: the same N rows through a bare loop on the same table: INSERT one row, DELETE it
  (one autocommit statement each), the least work any outbox must do per effect.
Each is measured twice, interleaved, and the faster run counts (other work on the machine
only ever slows a run down). Prints effects per second for both and their ratio. The
Celery kick (one Redis call per transaction) is left out: this measures the database path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._db import scratch_database, setup_django  # noqa: E402

ROUNDS = 2


def worker(mode: str, count: int, index: int) -> None:
    setup_django(os.environ["DATABASE_URL"])
    from django.db import connection
    from django.utils import timezone

    from effects import outbox
    from effects.models import Effect

    outbox.kick = lambda: None  # measure the database path only
    outbox.register("deliver", replace=True)(lambda effect_id, payload: None)
    connection.ensure_connection()
    print("ready", flush=True)
    sys.stdin.readline()  # go
    start = time.time()
    if mode == "enqueue":
        for n in range(count):
            outbox.enqueue("deliver", f"w{index}-{n}", {"n": n})
    elif mode == "drain":
        while True:
            outbox.drain(seconds=60)
            if not Effect.objects.filter(state="pending").exists():
                break
    elif mode == "limit":
        table = connection.ops.quote_name(Effect._meta.db_table)
        with connection.cursor() as cursor:
            for n in range(count):
                now = timezone.now()
                cursor.execute(
                    f"INSERT INTO {table} (kind, key, payload, channel, state, version, attempts,"
                    " due_at, claimed_by, claimed_until, last_error, created_at) VALUES"
                    " (%s, %s, %s::jsonb, '', 'pending', 1, 0, %s, '', NULL, '', %s)"
                    " RETURNING id",
                    ["deliver", f"w{index}-{n}", json.dumps({"n": n}), now, now],
                )
                (row_id,) = cursor.fetchone()
                cursor.execute(f"DELETE FROM {table} WHERE id = %s", [row_id])
    print(json.dumps({"start": start, "end": time.time()}), flush=True)


def run(mode: str, processes: int, total: int) -> float:
    """Run `processes` workers on `total` rows; seconds from the first start to the last end."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.outbox", "--worker", mode, str(total // processes),
             str(i)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        )
        for i in range(processes)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    spans = []
    for proc in procs:
        spans.append(json.loads(proc.stdout.readline()))
        proc.wait()
        assert proc.returncode == 0
    return max(s["end"] for s in spans) - min(s["start"] for s in spans)


GOAL = 0.5


def main(total: int = 4_000) -> float:
    """The outbox's rate over the bare loop's at 4 drainers."""
    with scratch_database("amux_bench_outbox") as url:
        setup_django(url, migrate=True)
        from django.db import connection

        from effects.models import Effect

        os.environ["DATABASE_URL"] = url
        connection.close()
        print(f"outbox bench: {total} effects, PostgreSQL {url.rsplit('/', 1)[0]}/…")
        results = {}
        for processes in (1, 4):
            run("limit", processes, total // 4)  # warm-up, not counted
            limits, enqueues, drains = [], [], []
            for _ in range(ROUNDS):  # interleaved, fastest of each: the box is shared
                limits.append(run("limit", processes, total))
                enqueues.append(run("enqueue", processes, total))
                assert Effect.objects.filter(state="pending").count() == total
                drains.append(run("drain", processes, total))
                assert not Effect.objects.exists(), "every effect was drained"
            limit, enqueue, drain = min(limits), min(enqueues), min(drains)
            connection.close()
            outbox_rate = total / (enqueue + drain)
            limit_rate = total / limit
            results[processes] = outbox_rate / limit_rate
            print(
                f"{processes} drainer(s): outbox {outbox_rate:,.0f} effects/s"
                f" (enqueue {total / enqueue:,.0f}/s, drain {total / drain:,.0f}/s);"
                f" limit INSERT+DELETE {limit_rate:,.0f}/s; ratio {results[processes]:.2f}"
            )
        verdict = "meets" if results[4] >= GOAL else "misses"
        print(f"ratio at 4 drainers: {results[4]:.2f} ({verdict} the goal of >= {GOAL})")
        return results[4]


def figures() -> dict[str, dict]:
    from bench._setup import figure

    ratio = main(2_000)  # enough rows for a steady rate; 4,000 on the command line
    return {"outbox_ratio": figure(ratio, "x bare INSERT+DELETE", f">= {GOAL}", ratio >= GOAL,
                                   "4 drainers")}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 4_000)
