"""Ingest benchmark: signed GitHub deliveries per second through the real ASGI server
(uvicorn) on PostgreSQL, p50/p99 latency at 200 deliveries/s, and the ratio to a bare
endpoint on the same stack that reads the body and does one INSERT.

    DATABASE_URL=postgres://… REDIS_URL=redis://… python bench/ingest.py [--seconds 10]

Each delivery is a real `issue_comment` payload (@octokit/webhooks-examples) with a fresh
delivery id and comment id, signed exactly as GitHub signs it, so every request verifies,
stores a Delivery, processes its mailbox and stores a Trigger. Prints ratios measured in
this one run; it is not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.ingest_settings"

SECRET = "bench-secret"
SLUG = "bench-gh"


def setup_database() -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from intake.models import Delivery, Source, Thread, Trigger
    from intake.sources.github import GitHub

    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_bare")
        cursor.execute("CREATE TABLE bench_bare (id bigserial PRIMARY KEY, body bytea, "
                       "at timestamptz NOT NULL DEFAULT now())")
    # (secrets deferred: a run under another data directory encrypted them with its key)
    source = Source.objects.filter(slug=SLUG).defer("secrets").first()
    if source:
        Delivery.objects.filter(source=source).delete()
        Trigger.objects.filter(source=source).delete()
        Thread.objects.filter(source=source).delete()
        source.delete()
    source = Source(kind="github", slug=SLUG, name="bench",
                    config=GitHub.validate_config({"repo": ["Codertocat/Hello-World"]}))
    source.secrets = {"webhook_secret": SECRET, "token": "unused"}
    source.save()
    connection.close()


def requests(n: int, start: int) -> list[bytes]:
    """n raw HTTP/1.1 requests, each a distinct signed delivery on its own thread."""
    from intake.sources.github import sign
    from tests.support.github_payloads import example

    base = example("issue_comment", "created")
    out = []
    for i in range(start, start + n):
        base["comment"]["id"] = 10_000_000 + i
        base["issue"]["number"] = i  # one mailbox per delivery, like a busy repository
        body = json.dumps(base).encode()
        head = (
            f"POST /hooks/github/{SLUG} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {uuid.uuid4()}\r\n"
            f"X-Hub-Signature-256: {sign(SECRET, body)}\r\n"
            f"User-Agent: GitHub-Hookshot/bench\r\n\r\n"
        ).encode()
        out.append(head + body)
    return out


def bare_requests(n: int) -> list[bytes]:
    from tests.support.github_payloads import example

    body = json.dumps(example("issue_comment", "created")).encode()
    head = (f"POST /bench/bare HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return [head + body] * n


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
    """Requests started at a fixed rate whatever the answers: latency of each."""
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.ingest_settings", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "amux_site.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"],
        cwd=ROOT, env=env,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("uvicorn did not start")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the 200/s run")
    parser.add_argument("--low-rate", type=float, default=20.0,
                        help="also measure latency at this rate (service time without queueing)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database")
    setup_database()
    port = free_port()
    server = start_server(port)
    try:
        n = args.requests
        warm = requests(200, 0)
        asyncio.run(closed_loop(port, warm, args.concurrency))
        asyncio.run(closed_loop(port, bare_requests(200), args.concurrency))
        ours, s1 = asyncio.run(closed_loop(port, requests(n, 1000), args.concurrency))
        bare, s2 = asyncio.run(closed_loop(port, bare_requests(n), args.concurrency))
        ours2, s3 = asyncio.run(closed_loop(port, requests(n, 1000 + n), args.concurrency))
        bare2, s4 = asyncio.run(closed_loop(port, bare_requests(n), args.concurrency))
        total = int(args.rate * args.seconds)
        lat, s5 = asyncio.run(open_loop(port, requests(total, 1000 + 2 * n), args.rate))
        blat, s6 = asyncio.run(open_loop(port, bare_requests(total), args.rate))
        low = int(args.low_rate * args.seconds)
        llat, _ = asyncio.run(open_loop(port, requests(low, 1000 + 2 * n + total), args.low_rate))
        lblat, _ = asyncio.run(open_loop(port, bare_requests(low), args.low_rate))
    finally:
        server.terminate()
        server.wait(timeout=20)
    ours_best, bare_best = max(ours, ours2), max(bare, bare2)
    print(f"signed GitHub deliveries (verify + store + process + trigger): "
          f"{ours_best:.0f}/s  (runs {ours:.0f}, {ours2:.0f}; statuses {s1 | s3})")
    print(f"bare endpoint (read body + one INSERT), same server and database: "
          f"{bare_best:.0f}/s  (runs {bare:.0f}, {bare2:.0f}; statuses {s2 | s4})")
    print(f"ratio deliveries/bare: {ours_best / bare_best:.2f}  (goal >= 0.5)")
    print(f"at {args.rate:.0f} deliveries/s for {args.seconds:.0f}s: p50 {pct(lat, 50):.1f} ms, "
          f"p99 {pct(lat, 99):.1f} ms  (goal p99 < 50 ms; statuses {s5})")
    print(f"bare at {args.rate:.0f}/s: p50 {pct(blat, 50):.1f} ms, p99 {pct(blat, 99):.1f} ms "
          f"(statuses {s6})")
    print(f"at {args.low_rate:.0f}/s: deliveries p50 {pct(llat, 50):.1f} ms, "
          f"p99 {pct(llat, 99):.1f} ms; bare p50 {pct(lblat, 50):.1f} ms, "
          f"p99 {pct(lblat, 99):.1f} ms")
    print(f"machine load average during the run: {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
