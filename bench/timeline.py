"""Event-to-websocket latency of the canonical timeline with many clients attached.

Starts the real ASGI app (uvicorn with `amux run`'s websocket settings, Channels, the Redis
timeline layer), and for each --clients count attaches that many websocket clients to one
session's timeline, then stores --events events the way the session host does (one committed
transaction each, published on commit by the process's publisher thread) and measures, per
client and event, the time from the commit returning to the client receiving it. Prints p50/p95/max
per count (goal p95 < 50 ms with 100 clients), checks that every client saw every event
once and in order, and prints the CPU the server and the clients spent per delivered frame.

The clients run in --procs processes of their own (uvloop), so that the bench's receiving
side, which on this one machine shares the cores with the server, is not what is measured.

    python bench/timeline.py [--clients 10,100] [--events 200] [--rate 20] [--procs 2]
                             [--format json|html]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
from pathlib import Path

from _setup import django_setup, percentile

HTML_SEQ = re.compile(r'data-seq="(\d+)"')


def clients_process(url: str, origin: str, token: str, n_clients: int, n_events: int,
                    html: bool, ready, go, out) -> None:
    """Some of the websocket clients, in their own process and event loop."""
    import websockets

    async def main() -> None:
        received: list[dict[int, float]] = [{} for _ in range(n_clients)]
        orders: list[list[int]] = [[] for _ in range(n_clients)]

        async def client(i: int, connected: asyncio.Event) -> None:
            async with websockets.connect(url, origin=origin, open_timeout=60, max_queue=None,
                                          additional_headers={"Authorization": f"Token {token}"}
                                          ) as ws:
                await ws.recv()  # snapshot
                connected.set()
                got, order = received[i], orders[i]
                while len(order) < n_events:
                    frame = await ws.recv()
                    at = time.time()
                    seq = (int(HTML_SEQ.search(frame).group(1)) if html
                           else json.loads(frame)["seq"])
                    got[seq] = at
                    order.append(seq)

        events = [asyncio.Event() for _ in range(n_clients)]
        tasks = []
        for i in range(n_clients):
            tasks.append(asyncio.create_task(client(i, events[i])))
            if i % 20 == 19:
                await asyncio.sleep(0.2)
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 120)
        ready.set()
        await asyncio.to_thread(go.wait, 120)
        cpu = time.process_time()
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
        out.put((received, orders, time.process_time() - cpu))

    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(main())
    else:
        uvloop.run(main())


async def publish_events(args, session_id: int) -> dict[int, float]:
    from sessions import timeline
    from sessions.runtimes.events import ErrorObserved

    committed: dict[int, float] = {}
    for n in range(args.events):
        # stored and published on commit exactly as the session host does
        stored = await asyncio.to_thread(
            timeline.record, session_id, None, [ErrorObserved(code="bench", message=str(n))])
        committed[stored[0]["seq"]] = time.time()
        await asyncio.sleep(1 / args.rate)
    return committed


def cpu_seconds(pgid: int) -> float:
    """CPU time (user + system) of every process in a process group."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def measure(args, n_clients: int, session_id: int, token: str, server) -> None:
    import multiprocessing

    from sessions import timeline

    start_seq = timeline.last_seq(session_id)
    url = (f"{server.ws_url}/ws/sessions/{session_id}/timeline?after={start_seq}"
           + ("&format=html" if args.format == "html" else ""))
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs, readies = [], []
    n_procs = max(1, min(args.procs, n_clients))
    for k in range(n_procs):
        share = n_clients // n_procs + (k < n_clients % n_procs)
        ready = ctx.Event()
        proc = ctx.Process(target=clients_process, args=(
            url, server.url, token, share, args.events, args.format == "html", ready, go, out))
        proc.start()
        procs.append(proc)
        readies.append(ready)
    try:
        for ready in readies:
            if not ready.wait(180):
                raise RuntimeError("the clients did not connect")
        go.set()
        server_cpu = cpu_seconds(server.proc.pid)
        committed = asyncio.run(publish_events(args, session_id))
        results = [out.get(timeout=300) for _ in procs]
        server_cpu = cpu_seconds(server.proc.pid) - server_cpu
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    received = [got for r in results for got in r[0]]
    orders = [order for r in results for order in r[1]]
    clients_cpu = sum(r[2] for r in results)
    latencies = [(got[seq] - committed[seq]) * 1000 for got in received for seq in committed]
    expected = sorted(committed)
    frames = len(latencies)
    print(f"clients={n_clients} events={args.events} rate={args.rate}/s "
          f"format={args.format} client_procs={n_procs} samples={frames}")
    print(f"  event-to-websocket latency: p50 {percentile(latencies, 50):.1f} ms, "
          f"p95 {percentile(latencies, 95):.1f} ms, max {max(latencies):.1f} ms "
          "(goal p95 < 50 ms with 100 clients)")
    print(f"  every client got every event once and in order: "
          f"{all(o == expected for o in orders)}")
    print(f"  CPU per delivered frame: server {server_cpu / frames * 1e6:.0f} µs, "
          f"clients {clients_cpu / frames * 1e6:.0f} µs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", default="10,100",
                        help="comma-separated client counts, measured one after another")
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--procs", type=int, default=2, help="client processes")
    parser.add_argument("--format", choices=["json", "html"], default="json",
                        help="html: the panel's fragments")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    args = parser.parse_args()
    django_setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from sessions.models import ProviderProfile, Session
    from tests.support.asgi import AsgiServer

    user, _ = get_user_model().objects.get_or_create(username="bench",
                                                     defaults={"is_staff": True})
    _, token = AuthToken.objects.create(user=user)
    # (secrets deferred: a run under another data directory encrypted them with its key)
    provider = ProviderProfile.objects.defer("secrets").filter(slug="bench-timeline").first() \
        or ProviderProfile.objects.create(slug="bench-timeline", platform="openai-compat",
                                          base_url="http://127.0.0.1:9/v1")
    env = {**os.environ, "AMUX_SECRET_KEY": settings.SECRET_KEY,
           "AMUX_DATA_DIR": str(settings.DATA_DIR), "REDIS_URL": settings.REDIS_URL}
    server = AsgiServer(env, workers=args.workers)
    print(f"uvicorn workers={args.workers}: {' '.join(server.ws_args)}")
    try:
        for n_clients in [int(n) for n in args.clients.split(",")]:
            session = Session.objects.create(
                runtime="codex", provider=provider, model="m",
                workdir=str(settings.DATA_DIR / "work" / "bench"))
            measure(args, n_clients, session.pk, token, server)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
