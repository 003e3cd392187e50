"""Ingest benchmark: signed GitHub deliveries through the real ASGI server (uvicorn) on
PostgreSQL, against endpoints of the same server and database, all on pooled connections
(AMUX_DB_POOL_SIZE), in one run: a bare endpoint that reads the body and does one INSERT,
as a Django view (/bench/bare, the floor of any view of this server), and, answered the
way amux answers webhooks (below Django's handler, bench/ingest_asgi.py), the floor of a
signed delivery (/bench/floor: the very same requests, their HMAC checked, their JSON
parsed, one INSERT into a table with the deliveries' unique index) and the bare INSERT
alone (/bench/bare-plain).

    python -m bench.ingest            # before/after: pool off (as on main), then pooled
    python -m bench.ingest --pooled   # only the pooled stack (what `make bench` reports)

Figures (pooled stack):
- ingest_ratio: signed deliveries answered per second over bare requests (the Django view)
  per second, each as fast as the server answers 16 keep-alive clients (best of two rounds
  each), before the worker starts (the deliveries wait stored);
- ingest_ratio_plain: the same over the floor of a signed delivery answered below Django
  (HMAC, JSON parse, the uniquely indexed INSERT): what amux adds to what any receiver of
  signed deliveries must do, on the webhooks' own path. Its note gives the CPU each kind of
  request cost the server process and PostgreSQL (/proc, when the database runs here),
  and the ratio over the bare INSERT alone;
- ingest_rate_per_s: the highest request rate the bare endpoint (the Django view) holds
  with p99 < 50 ms, found by stepping an open-loop rate up (bounded steps);
- ingest_processed_per_s: how fast a real Celery `default` worker (`amux run`'s process
  count) processes the stored backlog into triggers (first to last `processed_at`);
- ingest_p99_ms: p99 latency of signed deliveries offered at the held rate while that
  worker processes them as they come (woken after each commit); the figure's note says how
  far processing lagged behind the last answer;
- ingest_p99_ms_unprocessed: the same, with no worker running (the answer's own cost, on a
  machine that does nothing else).

Each delivery is a real `issue_comment` payload (@octokit/webhooks-examples) with a fresh
delivery id, comment id and issue number, signed exactly as GitHub signs it, so every
request verifies and stores a Delivery, and processing it stores a Trigger. Latency is
measured from when a request was due, so a server that falls behind is charged for it.
It runs on a scratch database of its own (bench/_db.py) and is not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._db import scratch_database, setup_django  # noqa: E402

SECRET = "bench-secret"
SLUG = "bench-gh"
P99_GOAL_MS = 50.0
RATIO_GOAL = 0.8
POOL_SIZE = "10"  # the default of AMUX_DB_POOL_SIZE
EXAMPLE = ROOT / "tests" / "fixtures" / "octokit-webhooks-examples-7.6.1" / "issue_comment.json"


def scratch_name() -> str:
    """Under DATABASE_URL's own database name, so checkouts sharing a server never collide."""
    own = urlsplit(os.environ.get("DATABASE_URL", "")).path.lstrip("/")
    return f"{own}_bench_ingest" if own and own not in ("postgres", "amux") \
        else "amux_bench_ingest"


def reset_database() -> None:
    """The bare endpoint's table and one GitHub source, nothing left from an earlier phase."""
    from django.db import connection

    from intake.models import Delivery, Source, Thread, Trigger
    from intake.sources.github import GitHub

    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_bare")
        cursor.execute("CREATE TABLE bench_bare (id bigserial PRIMARY KEY, body bytea, "
                       "at timestamptz NOT NULL DEFAULT now())")
        cursor.execute("DROP TABLE IF EXISTS bench_floor")
        cursor.execute("CREATE TABLE bench_floor (id bigserial PRIMARY KEY, "
                       "source_id bigint NOT NULL, delivery_id varchar(200) NOT NULL, "
                       "body bytea NOT NULL, at timestamptz NOT NULL DEFAULT now(), "
                       "UNIQUE (source_id, delivery_id))")
    source = Source.objects.filter(slug=SLUG).defer("secrets").first()
    if source:
        Trigger.objects.filter(source=source).delete()
        Delivery.objects.filter(source=source).delete()
        Thread.objects.filter(source=source).delete()
        source.delete()
    source = Source(kind="github", slug=SLUG, name="bench",
                    config=GitHub.validate_config({"repo": ["Codertocat/Hello-World"]}))
    source.secrets = {"webhook_secret": SECRET, "token": "unused"}
    source.save()
    connection.close()


def _sign(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


class Requests:
    """Raw HTTP/1.1 requests: each signed one a distinct delivery on its own issue."""

    def __init__(self):
        examples = json.loads(EXAMPLE.read_text())
        self.base = next(e for e in examples if e.get("action") == "created")
        self.next = 0
        bare_body = json.dumps(self.base).encode()
        self.bare_raw, self.bare_plain_raw = (
            (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             f"Content-Length: {len(bare_body)}\r\n\r\n").encode() + bare_body
            for path in ("/bench/bare", "/bench/bare-plain"))

    def signed(self, n: int, path: str = f"/hooks/github/{SLUG}") -> list[bytes]:
        out = []
        for _ in range(n):
            self.next += 1
            self.base["comment"]["id"] = 10_000_000 + self.next
            self.base["issue"]["number"] = self.next  # one mailbox each, like a busy repo
            body = json.dumps(self.base).encode()
            head = (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                f"X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {uuid.uuid4()}\r\n"
                f"X-Hub-Signature-256: {_sign(body)}\r\n"
                f"User-Agent: GitHub-Hookshot/bench\r\n\r\n"
            ).encode()
            out.append(head + body)
        return out

    def floor(self, n: int) -> list[bytes]:
        """Requests like the signed ones, each a delivery of its own, to the floor."""
        return self.signed(n, "/bench/floor")

    def bare(self, n: int) -> list[bytes]:
        return [self.bare_raw] * n

    def bare_plain(self, n: int) -> list[bytes]:
        return [self.bare_plain_raw] * n


class Conn:
    """A minimal keep-alive HTTP/1.1 client (the load generator must cost little CPU)."""

    def __init__(self, port: int):
        self.port = port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def send(self, raw: bytes) -> int:
        self.writer.write(raw)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        if length:
            await self.reader.readexactly(length)
        return status

    def close(self):
        if self.writer:
            self.writer.close()


async def closed_loop(port: int, reqs: list[bytes], concurrency: int) -> tuple[float, dict]:
    """As fast as the server answers, `concurrency` connections: requests per second."""
    conns = [Conn(port) for _ in range(concurrency)]
    for c in conns:
        await c.open()
    queue = list(reversed(reqs))
    statuses: dict[int, int] = {}

    async def worker(c):
        while queue:
            status = await c.send(queue.pop())
            statuses[status] = statuses.get(status, 0) + 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.close()
    return len(reqs) / elapsed, statuses


async def open_loop(port: int, reqs: list[bytes], rate: float) -> tuple[list[float], dict]:
    """Requests started at a fixed rate whatever the answers: latency of each from its due
    time (a request waiting for a free client connection is charged for the wait)."""
    pool: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(64):
        c = Conn(port)
        await c.open()
        pool.put_nowait(c)
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    async def one(raw, due):
        c = await pool.get()
        status = await c.send(raw)
        latencies.append(time.perf_counter() - due)
        statuses[status] = statuses.get(status, 0) + 1
        pool.put_nowait(c)

    t0 = time.perf_counter()
    tasks = []
    for i, raw in enumerate(reqs):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(raw, due)))
    await asyncio.gather(*tasks)
    while not pool.empty():
        pool.get_nowait().close()
    return latencies, statuses


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] * 1000


def ok(statuses: dict) -> bool:
    return all(200 <= code < 300 for code in statuses)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, env: dict[str, str], log) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "bench.ingest_asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log", "--lifespan", "off"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("uvicorn did not start")


class ConnectionCount:
    """The most server connections to `database` seen while it runs (pg_stat_activity)."""

    def __init__(self, admin_url: str, database: str):
        self.admin_url, self.database = admin_url, database
        self.peak = 0
        self.backends: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while not self._stop.wait(0.1):
                self.backends = [pid for (pid,) in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s",
                    [self.database]).fetchall()]
                self.peak = max(self.peak, len(self.backends))

    def pids(self) -> list[int]:
        """The database's backends as last seen (within 0.1 s)."""
        return list(self.backends)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


class CpuUse:
    """CPU seconds (user + system, /proc) used by the server process and by the database's
    backends (pg_stat_activity's, read through `counter`'s connection), when PostgreSQL
    runs on this machine."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, server_pid: int, counter: ConnectionCount):
        self.server_pid, self.counter = server_pid, counter

    @classmethod
    def of(cls, pid: int) -> float | None:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / cls.TICK

    def now(self) -> tuple[float | None, dict[int, float | None]]:
        return self.of(self.server_pid), {pid: self.of(pid) for pid in self.counter.pids()}

    def since(self, before) -> tuple[float | None, float | None]:
        (web0, db0), (web1, db1) = before, self.now()
        if web0 is None or web1 is None or not db1 or None in db1.values():
            return (None if web0 is None or web1 is None else web1 - web0), None
        # a backend that started meanwhile counts whole; one that ended is not seen (the
        # pool keeps its connections while the server runs)
        return web1 - web0, sum(used - (db0.get(pid) or 0.0) for pid, used in db1.items())


def start_worker(env: dict[str, str], log) -> subprocess.Popen:
    """A Celery `default` worker as `amux run` starts it (its process count and its lower
    CPU priority)."""
    from amux_site.management.commands.amux import BACKGROUND_NICE, CONCURRENCY

    return subprocess.Popen(
        ["nice", "-n", str(BACKGROUND_NICE),
         sys.executable, "-m", "celery", "-A", "amux_site", "worker", "-Q", "default",
         "-c", str(CONCURRENCY["default"]), "--without-mingle", "--without-gossip",
         "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def unprocessed() -> int:
    from django.db import connection

    from intake.models import Delivery

    try:
        return Delivery.objects.filter(processed_at__isnull=True).count()
    finally:
        connection.close()


def processing_rate() -> tuple[float, int]:
    """Deliveries processed per second (first to last `processed_at`), and how many."""
    from django.db import connection
    from django.db.models import Count, Max, Min

    from intake.models import Delivery

    try:
        row = Delivery.objects.filter(processed_at__isnull=False).aggregate(
            n=Count("id"), first=Min("processed_at"), last=Max("processed_at"))
    finally:
        connection.close()
    span = (row["last"] - row["first"]).total_seconds() if row["n"] > 1 else 0
    return (row["n"] / span if span else 0.0), row["n"]


def wait_processed(timeout: float) -> float | None:
    """Seconds until no delivery waits unprocessed, or None after `timeout`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if unprocessed() == 0:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


# Each kind of request measured flat out: signed deliveries, the floor of one (below
# Django), the bare INSERT as a Django view and below Django.
KINDS = ("signed", "floor", "bare", "bare_plain")


def flat_out(port: int, reqs: Requests, args, cpu: CpuUse) -> dict[str, dict]:
    """Each kind as fast as the server answers `args.concurrency` keep-alive clients, two
    rounds alternating the kinds after one to warm each: per kind the best round's
    requests per second, the statuses, and the CPU a request cost the server process and
    the database's backends over both rounds (None where it cannot be read)."""
    for kind in KINDS:
        asyncio.run(closed_loop(port, getattr(reqs, kind)(200), args.concurrency))
    out = {kind: {"per_s": 0.0, "statuses": {}, "web_us": 0.0, "db_us": 0.0}
           for kind in KINDS}
    for _ in range(2):
        for kind in KINDS:
            batch = getattr(reqs, kind)(args.requests)
            before = cpu.now()
            rate, statuses = asyncio.run(closed_loop(port, batch, args.concurrency))
            used = cpu.since(before)
            o = out[kind]
            o["per_s"] = max(o["per_s"], rate)
            o["statuses"] |= statuses
            for key, seconds in zip(("web_us", "db_us"), used, strict=True):
                o[key] = None if seconds is None or o[key] is None \
                    else o[key] + seconds * 1e6 / (2 * len(batch))
    return out


def phase(url: str, pooled: bool, args) -> dict:
    """One server (pool on or off) measured: throughput ratio, held rate, p99 at it."""
    reset_database()
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT),
           "DJANGO_SETTINGS_MODULE": "bench.ingest_settings",
           "AMUX_DB_POOL_SIZE": POOL_SIZE if pooled else "0"}
    reqs = Requests()
    port = free_port()
    parts = urlsplit(url)
    counter = ConnectionCount(parts._replace(path="/postgres").geturl(), parts.path.lstrip("/"))
    log_path = ROOT / "var" / "bench" / "ingest-server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab")  # noqa: SIM115 - closed after the server stops
    server = start_server(port, env, log)
    try:
        with counter:
            run = asyncio.run
            flat = flat_out(port, reqs, args, CpuUse(server.pid, counter))
            held, steps = step_rate(port, reqs, flat["bare"]["per_s"], args)
            alone_lat, alone_statuses = ([], {}) if held is None else run(
                open_loop(port, reqs.signed(int(held * args.seconds)), held))
            backlog = unprocessed()
            worker = start_worker(env, log)
            try:
                drained_in = wait_processed(args.drain_timeout)
                processed_per_s, processed_n = processing_rate()
                signed_lat, signed_statuses = ([], {}) if held is None else run(
                    open_loop(port, reqs.signed(int(held * args.seconds)), held))
                lag = wait_processed(args.drain_timeout)
            finally:
                worker.terminate()
                worker.wait(timeout=30)
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()
    signed = flat["signed"]["per_s"]
    return {
        "pooled": pooled, "signed_per_s": signed, "bare_per_s": flat["bare"]["per_s"],
        "ratio": signed / flat["bare"]["per_s"], "signed_statuses": flat["signed"]["statuses"],
        "floor_per_s": flat["floor"]["per_s"], "ratio_plain": signed / flat["floor"]["per_s"],
        "bare_plain_per_s": flat["bare_plain"]["per_s"],
        "ratio_bare_plain": signed / flat["bare_plain"]["per_s"], "flat": flat,
        "rate": held, "steps": steps,
        "p50_ms": pct(signed_lat, 50) if signed_lat else None,
        "p99_ms": pct(signed_lat, 99) if signed_lat else None,
        "rate_statuses": signed_statuses, "connections_peak": counter.peak,
        "alone_p99_ms": pct(alone_lat, 99) if alone_lat else None,
        "alone_ok": ok(alone_statuses),
        "backlog": backlog, "drained_in_s": drained_in, "processed_per_s": processed_per_s,
        "processed": processed_n, "lag_s": lag,
        "load": os.getloadavg()[0],
    }


def step_rate(port: int, reqs: Requests, bare_per_s: float, args) -> tuple[float | None, list]:
    """The highest rate the bare endpoint holds with p99 < 50 ms and no error: offered from
    40% of what it answers flat out, 15% more each step until it fails; if the first rate
    fails already (a busy machine), a third less each step until one holds. At most
    `max_steps` steps of `step_seconds` each."""
    rate = max(10.0, 0.4 * bare_per_s)
    held, steps, rising = None, [], None
    for _ in range(args.max_steps):
        count = max(20, int(rate * args.step_seconds))
        lat, statuses = asyncio.run(open_loop(port, reqs.bare(count), rate))
        p99 = pct(lat, 99)
        steps.append((round(rate), round(p99, 1)))
        holds = p99 < P99_GOAL_MS and ok(statuses)
        if rising is None:
            rising = holds
        if holds:
            held = rate
            if not rising:
                break
            rate *= 1.15
        elif rising or rate <= 2:
            break
        else:
            rate /= 1.5
    return held, steps


def run_phases(pooled_only: bool, args) -> list[dict]:
    with scratch_database(scratch_name()) as url:
        setup_django(url, migrate=True)
        from django.db import connection

        results = [] if pooled_only else [phase(url, False, args)]
        results.append(phase(url, True, args))
        connection.close()
        if getattr(connection, "pool", None) is not None:
            connection.close_pool()  # before the scratch database is dropped
    return results


def describe(r: dict) -> str:
    name = "pooled" if r["pooled"] else "pool off"
    at = (f"p99 of signed deliveries at it {r['p99_ms']:.1f} ms (p50 {r['p50_ms']:.1f}, "
          f"statuses {r['rate_statuses']}), {r['alone_p99_ms']:.1f} ms with no worker "
          f"processing meanwhile" if r["rate"] else "no rate held")
    return (f"{name}: signed {r['signed_per_s']:.0f}/s (statuses {r['signed_statuses']}), "
            f"bare {r['bare_per_s']:.0f}/s, ratio {r['ratio']:.2f} (goal >= {RATIO_GOAL}); "
            f"floor below Django {r['floor_per_s']:.0f}/s, ratio {r['ratio_plain']:.2f} "
            f"(goal >= {RATIO_GOAL}); bare below Django {r['bare_plain_per_s']:.0f}/s, ratio "
            f"{r['ratio_bare_plain']:.2f}; CPU per request {cpu_per_request(r['flat'])}; "
            f"bare holds {r['rate'] or 0:.0f}/s with p99 < {P99_GOAL_MS:.0f} ms "
            f"(steps rate/p99 ms: {r['steps']}); {at}; processing lagged "
            f"{_secs(r['lag_s'])} behind the last answer; a backlog of {r['backlog']} "
            f"processed in {_secs(r['drained_in_s'])} by the worker, "
            f"{r['processed_per_s']:.0f} deliveries/s; peak PostgreSQL connections "
            f"{r['connections_peak']}; load {r['load']:.1f} on {os.cpu_count()} CPUs")


def cpu_per_request(flat: dict[str, dict]) -> str:
    def us(value):
        return "?" if value is None else f"{value:.0f}"

    return ", ".join(f"{kind} {us(o['web_us'])} us server + {us(o['db_us'])} us PostgreSQL"
                     for kind, o in flat.items())


def _secs(value: float | None) -> str:
    return "over the timeout" if value is None else f"{value:.1f} s"


def _args(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pooled", action="store_true", help="only the pooled stack")
    parser.add_argument("--requests", type=int, default=1000,
                        help="requests per flat-out round (two rounds of each kind)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--step-seconds", type=float, default=3.0)
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="length of the signed run at the held rate")
    parser.add_argument("--drain-timeout", type=float, default=300.0,
                        help="seconds the worker may take to process what was stored")
    return parser.parse_args(argv)


def figures() -> dict[str, dict]:
    (r,) = run_phases(True, _args([]))
    print(describe(r), flush=True)
    p99, rate = r["p99_ms"], r["rate"]
    note = f"pooled, {POOL_SIZE} connections per process; bare {r['bare_per_s']:.0f}/s"
    return {
        "ingest_ratio": {"value": round(r["ratio"], 3), "unit": "ratio",
                         "goal": f">= {RATIO_GOAL}", "met": r["ratio"] >= RATIO_GOAL,
                         "note": note},
        "ingest_ratio_plain": {
            "value": round(r["ratio_plain"], 3), "unit": "ratio", "goal": f">= {RATIO_GOAL}",
            "met": r["ratio_plain"] >= RATIO_GOAL,
            "note": f"over the floor answered below Django as webhooks are (HMAC, JSON parse, "
                    f"uniquely indexed INSERT), {r['floor_per_s']:.0f}/s; over the bare INSERT "
                    f"alone {r['ratio_bare_plain']:.2f}; CPU per request "
                    f"{cpu_per_request(r['flat'])}"},
        "ingest_p99_ms": {"value": None if p99 is None else round(p99, 1), "unit": "ms",
                          "goal": f"< {P99_GOAL_MS:.0f}",
                          "met": p99 is not None and p99 < P99_GOAL_MS and ok(r["rate_statuses"]),
                          "note": f"signed deliveries at {rate or 0:.0f}/s, processed "
                                  f"meanwhile; processing lagged {_secs(r['lag_s'])} "
                                  f"behind the last answer"},
        "ingest_p99_ms_unprocessed": {
            "value": None if r["alone_p99_ms"] is None else round(r["alone_p99_ms"], 1),
            "unit": "ms", "goal": "", "met": None,
            "note": f"signed deliveries at {rate or 0:.0f}/s with no worker processing "
                    f"meanwhile (the answer's own cost)"},
        "ingest_rate_per_s": {"value": None if rate is None else round(rate), "unit": "/s",
                              "goal": "", "met": None,
                              "note": "highest rate the bare endpoint holds with p99 < 50 ms"},
        "ingest_processed_per_s": {
            "value": round(r["processed_per_s"], 1), "unit": "/s", "goal": "", "met": None,
            "note": f"off-request processing by one `default` worker; a backlog of "
                    f"{r['backlog']} in {_secs(r['drained_in_s'])}"},
    }


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    for r in run_phases(args.pooled, args):
        print(describe(r), flush=True)


if __name__ == "__main__":
    main()
