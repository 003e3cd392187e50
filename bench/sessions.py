"""Sessions one machine holds: 50 awake and 500 sleeping, with a real runtime.

A runtime worker as `amux run` starts it (one Celery process, its thread pool, a thread per
awake session) against a scratch PostgreSQL database and Redis; the real runtime (Codex
app-server by default, or Pi, from node_modules) against the scripted model server, which
answers every request at once. These figures, measured in one run:

* ``session_rss_mb`` — what amux adds per awake session beyond the runtime's own process:
  the runtime worker's RSS with 50 sessions awake minus its RSS before the first, over 50
  (the runtimes are separate processes and are not in it). Goal < 30 MB.
* ``sleeping_session_processes`` — with every one of the 550 sessions asleep: processes
  left under the runtime worker, leases held and host tasks on their way, per sleeping
  session. Goal 0.
* ``wake_p95_ms`` — a message to a sleeping session until its runtime's first model
  request, p95 over 50 wakes that resume the native conversation (one wake every 0.3 s,
  while the others already woken stay awake). Goal < 2000.
* ``session_total_rss_mb_codex`` / ``session_total_rss_mb_pi`` — the memory of everything
  an awake session needs, per awake session: with the sessions awake (each after its first
  turn), the runtime worker plus every process under it (the runtimes and whatever they
  started), summed and divided by the awake sessions. The sum is of PSS (proportional set
  size, /proc/<pid>/smaps_rollup), not RSS: N identical Node or Codex processes share
  their binary's and libraries' pages, which RSS counts N times; the note gives both (RSS
  is used for a process whose smaps_rollup cannot be read). Codex is measured with the
  sessions of the main run; Pi with ``--pi-awake`` more sessions woken in the same runtime
  worker once the Codex sessions sleep again (skipped with ``--runtime pi``, where the main
  run measures it). ``session_total_rss_mb_codex`` is measured last, with ``--shared-awake``
  Codex sessions made under private-home, where they are threads of shared app-servers
  (runtimes/codex_shared.py: one process for up to AMUX_CODEX_THREADS_PER_APP_SERVER
  sessions), woken in the same worker once the others sleep;
  ``session_total_rss_mb_codex_process_each`` beside it is the main run's sessions, one
  ``codex app-server`` each (as under linux-dac and bwrap, or with sharing off). The note
  says how many runtime process trees the sessions had. Goal (Codex) < 50.
* ``sessions_awake_max_codex`` — the most awake Codex sessions this machine holds at once,
  derived from that measurement (the shared app-servers') rather than by starting them
  (``sessions_awake_max_codex_process_each``: from one process per session): as the
  default capacity
  (amux_site/session_capacity.py) would be with the measured cost, i.e. three quarters of
  MemAvailable when the bench started over ``session_total_rss_mb_codex``, capped at the
  runtime worker's thread pool (at most ``session_capacity.MAX`` threads). The
  ``AMUX_SESSION_MEMORY_MB`` default (amux_site/settings.py) comes from these figures.
  Goal >= 200.

    python -m bench.sessions [--awake 50] [--sleeping 500] [--runtime codex|pi]
                             [--pool threads|prefork] [--pi-awake 20] [--shared-awake 50]

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


def _memory_mb(pids: list[int]) -> tuple[float, float, int]:
    """(RSS, PSS, processes whose PSS could not be read) of ``pids`` together, in MB.
    PSS splits each shared page among the processes mapping it, so N copies of one
    runtime count its binary once; where smaps_rollup is unreadable RSS stands in."""
    rss = pss = 0.0
    unread = 0
    for pid in pids:
        fields: dict[str, int] = {}
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                name, _, rest = line.partition(":")
                if name in ("Rss", "Pss") and rest.split():
                    fields[name] = int(rest.split()[0])
        except (OSError, ValueError):
            pass
        if "Rss" in fields and "Pss" in fields:
            rss += fields["Rss"] / 1024
            pss += fields["Pss"] / 1024
        else:
            unread += 1
            try:
                one = _rss_mb(pid)
            except OSError:
                continue  # gone meanwhile
            rss += one
            pss += one
    return rss, pss, unread


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
            pool: str = "threads", pi_awake: int = 20,
            shared_awake: int | None = None) -> dict[str, dict]:
    """Run the bench once; ``{name: {"value", "unit", "goal", "met"}}``."""
    from amux_site import session_capacity
    from bench._db import scratch_database

    available = session_capacity.available_mb()

    data = Path(tempfile.mkdtemp(prefix="bench-sessions-"))
    saved = {k: os.environ.get(k) for k in ("DATABASE_URL", "AMUX_DATA_DIR")}
    try:
        with scratch_database("amux_bench_sessions") as url:
            os.environ["AMUX_DATA_DIR"] = str(data)
            try:
                shared = awake if shared_awake is None else shared_awake
                return _run(url, data, awake, sleeping, runtime, pool,
                            pi_awake if runtime != "pi" else 0, available,
                            shared if runtime == "codex" else 0)
            except Exception:
                log = data / "runtime.log"
                if log.exists():  # the runtime worker's last words say why
                    tail = log.read_text(errors="replace").splitlines()[-40:]
                    print("\n".join(tail), file=sys.stderr)
                # and the sessions' last events (a turn that failed, a provider unreached);
                # never in the way of the error itself
                with contextlib.suppress(Exception):
                    from sessions.models import TimelineEvent

                    for event in TimelineEvent.objects.order_by("-pk")[:15]:
                        print(event.session_id, event.type, str(event.payload)[:300],
                              file=sys.stderr)
                raise
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(data, ignore_errors=True)


def _run(url: str, data: Path, awake: int, sleeping: int, runtime: str,
         pool: str, pi_awake: int, available: int | None,
         shared_awake: int = 0) -> dict[str, dict]:
    from bench._db import setup_django

    setup_django(url, migrate=True)
    from django.conf import settings

    from sessions import capacity, new_session, services
    from sessions.models import Lifecycle, ProviderProfile, Session, TimelineEvent
    from tests.support.model_server import ModelServer, Text
    from tests.support.sessions import gateway_served

    settings.WORK_DIR = data / "work"
    # every session not archived holds a runtime identity (a pooled OS user, made when its
    # runtime first starts): the bench's sessions all need one, the sleepers' never used
    identities = max(settings.AMUX_RUNTIME_IDENTITIES, awake + sleeping + pi_awake)
    settings.AMUX_RUNTIME_IDENTITIES = identities
    # a session's runtime reaches its provider only through amux's model gateway, served
    # here as `amux run` serves it (the runtime worker is told its URL)
    with ModelServer() as model, gateway_served(settings):
        model.responder = lambda body: Text("ok")
        provider = ProviderProfile.objects.create(
            slug="bench", platform="openai-compat", base_url=model.base_url,
            model_names=sorted(set(MODEL.values())))
        provider.secrets = {"api_key": "sk-bench"}
        provider.save()
        launch = new_session.Launch.direct(runtime=runtime, provider="bench",
                                           model=MODEL[runtime])
        woken = [services.create_session(launch) for _ in range(awake)]
        asleep = [services.create_session(launch) for _ in range(sleeping)]
        Session.objects.filter(pk__in=[s.pk for s in asleep]).update(
            lifecycle=Lifecycle.SLEEPING)
        pi = new_session.Launch.direct(runtime="pi", provider="bench", model=MODEL["pi"])
        others = [services.create_session(pi) for _ in range(pi_awake)]
        # Codex sessions made under private-home (their isolation is frozen at creation):
        # threads of shared app-servers (runtimes/codex_shared.py)
        machine_isolation = settings.AMUX_ISOLATION
        settings.AMUX_ISOLATION = "private-home"
        codex = new_session.Launch.direct(runtime="codex", provider="bench",
                                          model=MODEL["codex"])
        threads = [services.create_session(codex) for _ in range(shared_awake)]
        settings.AMUX_ISOLATION = machine_isolation
        env = {**os.environ, "DATABASE_URL": url, "AMUX_DATA_DIR": str(data),
               "REDIS_URL": settings.REDIS_URL, "AMUX_SECRET_KEY": settings.SECRET_KEY,
               "AMUX_URL": settings.AMUX_URL, "AMUX_RUNTIME_IDENTITIES": str(identities),
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

            def completed(n: int, among: list[int] = ids) -> bool:
                return TimelineEvent.objects.filter(
                    session_id__in=among, type="turn.completed").count() >= n

            # 1. wake every session for its first turn (a new native conversation each)
            for session in woken:
                services.post_message(session.pk, f"first turn of {session.pk}")
                time.sleep(0.3)
            _wait(lambda: completed(awake), 60 + 4 * awake, f"{awake} first turns")
            rows = list(Session.objects.filter(pk__in=ids))
            assert all(services.lease_alive(s) for s in rows), "a session fell asleep"
            time.sleep(2)
            runtime_pids = {p for s in rows for p in _pids_of(s.runtime_tag)}
            totals = {runtime: _total(worker.pid, awake)}
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

            def awake_alone(asleep: list, group: list, what: str) -> float:
                """Put `asleep` to sleep, wake `group` alone in the same worker with a
                first turn each, and measure the memory per awake session."""
                for session in asleep:
                    services.sleep(session.pk)
                _wait(lambda: not [p for p in _descendants(worker.pid)
                                   if pool != "prefork" or _descendants(p)],
                      120, "every runtime stopped")
                ids = [s.pk for s in group]
                for session in group:
                    services.post_message(session.pk, f"first turn of {session.pk}")
                    time.sleep(0.3)
                _wait(lambda: completed(len(group), ids), 300, f"{len(group)} {what}")
                time.sleep(2)
                return _total(worker.pid, len(group))

            # 4. the other runtime's memory, in the same worker once these sleep again
            if others:
                totals["pi"] = awake_alone(woken, others, "first Pi turns")
            # 5. Codex sessions as threads of shared app-servers, in the same worker once
            # the others sleep
            if threads:
                totals["codex_shared"] = awake_alone(
                    [*woken, *others], threads, "first turns of shared app-server threads")
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
    results = {
        "session_rss_mb": {"value": round(per_session, 2), "unit": "MB", "goal": "< 30",
                           "met": per_session < 30},
        "sleeping_session_processes": {"value": per_sleeper, "unit": "per session",
                                       "goal": "0", "met": held == 0},
        "wake_p95_ms": {"value": round(p95, 1), "unit": "ms", "goal": "< 2000",
                        "met": p95 < 2000 and len(wakes) == awake},
    }
    for name, measured in totals.items():
        results.update(_total_figures(name, measured, available))
    if "codex_shared" in totals and "codex" in totals:
        # the figure is the shared layout's (where it applies: private-home); one process
        # per session (linux-dac, bwrap, or sharing off) beside it
        own = results.pop("session_total_rss_mb_codex")
        own_max = results.pop("sessions_awake_max_codex")
        results["session_total_rss_mb_codex"] = results.pop(
            "session_total_rss_mb_codex_shared")
        results["sessions_awake_max_codex"] = results.pop("sessions_awake_max_codex_shared")
        results["session_total_rss_mb_codex_process_each"] = {**own, "goal": "-",
                                                              "met": None}
        results["sessions_awake_max_codex_process_each"] = {**own_max, "goal": "-",
                                                            "met": None}
    return results


def _total(worker_pid: int, awake: int) -> dict:
    """The runtime worker and every process under it, summed (see the docstring)."""
    under = _descendants(worker_pid)
    rss, pss, unread = _memory_mb([worker_pid, *under])
    trees = sum(1 for p in under if _parent(p) == worker_pid)
    return {"awake": awake, "rss": rss, "pss": pss, "unread": unread,
            "processes": len(under), "trees": trees}


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _total_figures(runtime: str, t: dict, available: int | None) -> dict[str, dict]:
    from amux_site import session_capacity

    per_pss, per_rss = t["pss"] / t["awake"], t["rss"] / t["awake"]
    shared = ("one process tree per session" if t["trees"] >= t["awake"]
              else f"{t['awake']} sessions in {t['trees']} process trees")
    note = (f"{t['awake']} awake {runtime} sessions: runtime worker + {t['processes']} "
            f"processes under it ({shared}): PSS {t['pss']:.0f} MB "
            f"({per_pss:.1f} MB per session, the figure), RSS {t['rss']:.0f} MB "
            f"({per_rss:.1f} MB per session)"
            + (f"; {t['unread']} processes without smaps_rollup counted by RSS"
               if t["unread"] else ""))
    codex = runtime.startswith("codex")
    # "_shared": threads of shared app-servers
    suffix = runtime.removeprefix("codex") if codex else ""
    if suffix:
        note = f"under private-home, threads of shared app-servers: {note}"
    out = {f"session_total_rss_mb_{runtime}": {
        "value": round(per_pss, 1), "unit": "MB PSS", "note": note,
        **({"goal": "< 50", "met": per_pss < 50} if codex
           else {"goal": "-", "met": None})}}
    if codex:
        if available is None:
            out[f"sessions_awake_max_codex{suffix}"] = {
                "value": None, "unit": "sessions", "goal": ">= 200", "met": None,
                "note": "not measured: no /proc/meminfo MemAvailable"}
        else:
            by_memory = int(available * session_capacity.SHARE // per_pss)
            most = max(1, min(session_capacity.MAX, by_memory))
            out[f"sessions_awake_max_codex{suffix}"] = {
                "value": most, "unit": "sessions", "goal": ">= 200", "met": most >= 200,
                "note": (f"MemAvailable {available} MB at the start x "
                         f"{session_capacity.SHARE} / {per_pss:.1f} MB PSS per session = "
                         f"{by_memory}, capped at the thread pool's "
                         f"{session_capacity.MAX} (all of MemAvailable would hold "
                         f"{int(available // per_pss)})")}
    return out


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
    parser.add_argument("--pi-awake", type=int, default=20,
                        help="Pi sessions woken after a Codex run for their memory (0: none)")
    parser.add_argument("--shared-awake", type=int, default=None,
                        help="Codex sessions under private-home, threads of shared "
                             "app-servers, woken last (default: --awake; 0: none)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    results = figures(args.awake, args.sleeping, args.runtime, args.pool, args.pi_awake,
                      args.shared_awake)
    for name, fig in results.items():
        print(f"{name:28} {fig['value']!s:>10} {fig['unit']:12} goal {fig['goal']:8} "
              f"{'met' if fig['met'] else 'NOT met' if fig['met'] is False else '-'}")
        if fig.get("note"):
            print(f"    {fig['note']}")


if __name__ == "__main__":
    main()
