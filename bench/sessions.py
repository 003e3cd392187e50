"""Sessions one machine holds: 50 awake and 500 sleeping, with a real runtime.

A runtime worker as `amux run` starts it (one Celery process, its thread pool, a thread per
awake session) against a scratch PostgreSQL database and Redis; the real runtime (Codex
app-server by default, or Pi, from node_modules) against the scripted model server, which
answers every request at once. Three figures, measured in one run:

* ``session_rss_mb`` — what amux adds per awake session beyond the runtime's own process:
  the runtime worker's RSS with 50 sessions awake minus its RSS before the first, over 50
  (the runtimes are separate processes and are not in it). Goal < 30 MB.
* ``sleeping_session_processes`` — with every one of the 550 sessions asleep: processes
  left under the runtime worker, leases held and host tasks on their way, per sleeping
  session. Goal 0.
* ``wake_p95_ms`` — a message to a sleeping session until its runtime's first model
  request, p95 over 50 wakes that resume the native conversation (one wake every 0.3 s,
  while the others already woken stay awake). Goal < 2000.

    python -m bench.sessions [--awake 50] [--sleeping 500] [--runtime codex|pi]
                             [--pool threads|prefork]

``--pool prefork`` measures the previous layout (a prefork child per awake session, whose
RSS is then the figure) for comparison. Needs DATABASE_URL=postgres://… (a scratch
database is made next to it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = {"codex": "gpt-5.5", "pi": "scripted-model"}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _wait(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"bench.sessions: {what} not reached in {timeout:.0f} s")


def figures(awake: int = 50, sleeping: int = 500, runtime: str = "codex",
            pool: str = "threads") -> dict[str, dict]:
    """Run the bench once; ``{name: {"value", "unit", "goal", "met"}}``."""
    from bench._db import scratch_database

    data = Path(tempfile.mkdtemp(prefix="bench-sessions-"))
    saved = {k: os.environ.get(k) for k in ("DATABASE_URL", "AMUX_DATA_DIR")}
    try:
        with scratch_database("amux_bench_sessions") as url:
            os.environ["AMUX_DATA_DIR"] = str(data)
            return _run(url, data, awake, sleeping, runtime, pool)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(data, ignore_errors=True)


def _run(url: str, data: Path, awake: int, sleeping: int, runtime: str,
         pool: str) -> dict[str, dict]:
    from bench._db import setup_django

    setup_django(url, migrate=True)
    from django.conf import settings

    from sessions import capacity, services
    from sessions.models import Lifecycle, ProviderProfile, Session, TimelineEvent
    from tests.support.model_server import ModelServer, Text

    settings.WORK_DIR = data / "work"
    with ModelServer() as model:
        model.responder = lambda body: Text("ok")
        provider = ProviderProfile.objects.create(
            slug="bench", platform="openai-compat", base_url=model.base_url,
            model_names=[MODEL[runtime]])
        provider.secrets = {"api_key": "sk-bench"}
        provider.save()
        woken = [services.create_session(runtime=runtime, provider="bench",
                                         model=MODEL[runtime]) for _ in range(awake)]
        asleep = [services.create_session(runtime=runtime, provider="bench",
                                          model=MODEL[runtime]) for _ in range(sleeping)]
        Session.objects.filter(pk__in=[s.pk for s in asleep]).update(
            lifecycle=Lifecycle.SLEEPING)
        env = {**os.environ, "DATABASE_URL": url, "AMUX_DATA_DIR": str(data),
               "REDIS_URL": settings.REDIS_URL, "AMUX_SECRET_KEY": settings.SECRET_KEY,
               "DJANGO_SETTINGS_MODULE": "amux_site.settings"}
        slots = awake + 5
        argv = [sys.executable, "-m", "celery", "-A", "amux_site", "worker", "-Q",
                f"runtime,runtime.{settings.AMUX_HOSTNAME}", "-c", str(slots), "-P", pool,
                "-n", f"bench-runtime@{settings.AMUX_HOSTNAME}", "--without-gossip",
                "--without-mingle", "--without-heartbeat", "-l", "warning"]
        started = time.time()
        log = open(data / "runtime.log", "wb")  # noqa: SIM115
        worker = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait(lambda: capacity.room().slots >= slots, 90, "the runtime worker's slots")
            time.sleep(2)
            base_rss = _rss_mb(worker.pid) + (sum(_rss_mb(p) for p in _descendants(worker.pid))
                                              if pool == "prefork" else 0)
            ids = [s.pk for s in woken]

            def completed(n: int) -> bool:
                return TimelineEvent.objects.filter(
                    session_id__in=ids, type="turn.completed").count() >= n

            # 1. wake every session for its first turn (a new native conversation each)
            for session in woken:
                services.post_message(session.pk, f"first turn of {session.pk}")
                time.sleep(0.3)
            _wait(lambda: completed(awake), 300, f"{awake} first turns")
            rows = list(Session.objects.filter(pk__in=ids))
            assert all(services.lease_alive(s) for s in rows), "a session fell asleep"
            time.sleep(2)
            runtime_pids = {p for s in rows for p in _pids_of(s.runtime_tag)}
            if pool == "prefork":
                hosts = [p for p in _descendants(worker.pid) if p not in runtime_pids
                         and not _ancestor_in(p, runtime_pids)]
                worker_rss = _rss_mb(worker.pid) + sum(_rss_mb(p) for p in hosts)
            else:
                worker_rss = _rss_mb(worker.pid)
            runtime_rss = sum(_rss_mb(p) for p in _descendants(worker.pid)
                              if p in runtime_pids or _ancestor_in(p, runtime_pids))
            if pool == "prefork":
                # each awake session holds a whole prefork child: its RSS is the cost
                busy = [p for p in hosts if any(_ancestor_in(r, {p}) for r in runtime_pids)]
                per_session = sum(_rss_mb(p) for p in busy) / max(1, len(busy))
            else:
                per_session = (worker_rss - base_rss) / awake

            # 2. all of them asleep: nothing held
            for session in woken:
                services.sleep(session.pk)
            _wait(lambda: Session.objects.filter(pk__in=ids,
                                                 lifecycle=Lifecycle.SLEEPING).count() == awake,
                  120, "every session asleep")

            def holding() -> tuple[int, int, int]:
                left = [p for p in _descendants(worker.pid)
                        if pool != "prefork" or _descendants(p)]
                return (len(left), Session.objects.filter(capacity._live_lease()).count(),
                        _unacked(settings.REDIS_URL, started))

            # a host's task ends (and is acknowledged) just after its session sleeps
            with contextlib.suppress(TimeoutError):
                _wait(lambda: sum(holding()) == 0, 30, "nothing held")
            processes, leases, tasks = holding()
            held = processes + leases + tasks
            total_sleeping = Session.objects.filter(lifecycle=Lifecycle.SLEEPING).count()

            # 3. wake them again, one every 0.3 s: the native conversation resumed
            marks: dict[int, float] = {}
            for session in woken:
                marks[session.pk] = time.time()
                services.post_message(session.pk, f"wake {session.pk} now")
                time.sleep(0.3)
            _wait(lambda: completed(2 * awake), 300, f"{awake} wakes")
            firsts: dict[int, float] = {}
            for request in model.requests:
                text = json.dumps(request.body)
                for pk in marks:
                    if pk not in firsts and f"wake {pk} now" in text:
                        firsts[pk] = request.at
            wakes = [(firsts[pk] - at) * 1000 for pk, at in marks.items() if pk in firsts]
        finally:
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, 9)
            log.close()
    p95 = _percentile(wakes, 95)
    per_sleeper = held / max(1, total_sleeping)
    print(f"bench.sessions: {runtime}, pool {pool}: runtime worker {base_rss:.0f} MB → "
          f"{worker_rss:.0f} MB with {awake} awake; runtimes {runtime_rss / awake:.0f} MB each "
          f"(not amux's); {total_sleeping} asleep hold {processes} processes, {leases} leases, "
          f"{tasks} host tasks; wake p50 "
          f"{_percentile(wakes, 50):.0f} ms over {len(wakes)}", file=sys.stderr)
    return {
        "session_rss_mb": {"value": round(per_session, 2), "unit": "MB", "goal": "< 30",
                           "met": per_session < 30},
        "sleeping_session_processes": {"value": per_sleeper, "unit": "per session",
                                       "goal": "0", "met": held == 0},
        "wake_p95_ms": {"value": round(p95, 1), "unit": "ms", "goal": "< 2000",
                        "met": p95 < 2000 and len(wakes) == awake},
    }


def _pids_of(tag: str) -> list[int]:
    from runtimes.base import tagged_pids

    return tagged_pids(tag) if tag else []


def _ancestor_in(pid: int, ancestors: set[int]) -> bool:
    try:
        while pid > 1:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
            if pid in ancestors:
                return True
    except OSError:
        return False
    return False


def _unacked(redis_url: str, since: float) -> int:
    """Host tasks delivered to a worker since ``since`` (this run) and not acknowledged:
    Celery's Redis transport keeps them in the `unacked` hash, their delivery times in
    `unacked_index`."""
    import redis

    client = redis.Redis.from_url(redis_url)
    tags = client.zrangebyscore("unacked_index", since, "+inf")
    count = 0
    for raw in client.hmget("unacked", tags) if tags else []:
        if raw is None:
            continue
        try:
            message = json.loads(raw)[0]
        except (ValueError, KeyError, TypeError, IndexError):
            continue
        if message.get("headers", {}).get("task") == "sessions.host":
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--awake", type=int, default=50)
    parser.add_argument("--sleeping", type=int, default=500)
    parser.add_argument("--runtime", default="codex", choices=sorted(MODEL))
    parser.add_argument("--pool", default="threads", choices=["threads", "prefork"])
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    results = figures(args.awake, args.sleeping, args.runtime, args.pool)
    for name, fig in results.items():
        print(f"{name:28} {fig['value']:>10} {fig['unit']:12} goal {fig['goal']:8} "
              f"{'met' if fig['met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
