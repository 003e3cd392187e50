"""Event-to-websocket latency of the canonical timeline with many clients attached
(goal: p95 < 50 ms with 1,000 clients across the timelines of 50 live sessions, and no
client dropped).

Starts the real ASGI app (uvicorn with `amux run`'s websocket settings, Channels, the Redis
timeline layer), attaches --per-session websocket clients to each of --sessions sessions'
timelines, then stores --events events per session, round-robin across the sessions at
--rate events/s in all, the way the session host does (one committed transaction each,
published on commit by the process's publisher thread), and measures, per client and event,
the time from the commit returning to the client receiving it. Prints p50/p95/max, checks
that every client saw every event of its session once and in order, counts the clients the
server dropped (a closed connection before the last event: none is expected unless a client
falls more than `sessions.consumers.INBOX_LIMIT` batches behind), and prints the CPU the
server and the clients spent per delivered frame.

The clients run in --procs processes of their own (uvloop), so that the bench's receiving
side, which on this one machine shares the cores with the server, is not what is measured.

    python -m bench.timeline [--sessions 50] [--per-session 20] [--events 20] [--rate 50]
                             [--procs 2] [--format json|html]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import time
from pathlib import Path

from bench._setup import django_setup, percentile

HTML_SEQ = re.compile(r'data-seq="(\d+)"')
GOAL_MS = 50


def clients_process(targets: list[tuple[int, str]], origin: str, token: str, n_events: int,
                    html: bool, ready, go, out) -> None:
    """Some of the websocket clients, in their own process and event loop: one per
    (session id, url) target; each expects n_events events."""
    import websockets

    async def main() -> None:
        n_clients = len(targets)
        received: list[dict[int, float]] = [{} for _ in range(n_clients)]
        orders: list[list[int]] = [[] for _ in range(n_clients)]
        dropped: list[str] = []

        async def client(i: int, connected: asyncio.Event) -> None:
            _, url = targets[i]
            try:
                async with websockets.connect(
                        url, origin=origin, open_timeout=400, max_queue=None,
                        additional_headers={"Authorization": f"Token {token}"}) as ws:
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
            except websockets.ConnectionClosed as exc:
                dropped.append(f"client {i}: closed {exc.rcvd.code if exc.rcvd else '-'}")
                connected.set()

        events = [asyncio.Event() for _ in range(n_clients)]
        tasks = []
        for i in range(n_clients):
            tasks.append(asyncio.create_task(client(i, events[i])))
            if i % 20 == 19:
                await asyncio.sleep(0.2)
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 420)
        ready.set()
        await asyncio.to_thread(go.wait, 420)
        cpu = time.process_time()
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
        out.put(([t[0] for t in targets], received, orders, dropped,
                 time.process_time() - cpu))

    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(main())
    else:
        uvloop.run(main())


async def publish_events(args, session_ids: list[int]) -> dict[tuple[int, int], float]:
    from runtimes.events import ErrorObserved
    from sessions import timeline

    committed: dict[tuple[int, int], float] = {}
    interval = 1 / args.rate
    next_at = time.monotonic()
    for n in range(args.events):
        for session_id in session_ids:
            # stored and published on commit exactly as the session host does
            stored = await asyncio.to_thread(
                timeline.record, session_id, None,
                [ErrorObserved(code="bench", message=str(n))])
            committed[(session_id, stored[0]["seq"])] = time.time()
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
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


def measure(args, session_ids: list[int], token: str, server) -> dict:
    import multiprocessing

    from sessions import timeline

    targets = []
    for session_id in session_ids:
        url = (f"{server.ws_url}/ws/sessions/{session_id}/timeline"
               f"?after={timeline.last_seq(session_id)}"
               + ("&format=html" if args.format == "html" else ""))
        targets += [(session_id, url)] * args.per_session
    n_clients = len(targets)
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs, readies = [], []
    n_procs = max(1, min(args.procs, n_clients))
    for k in range(n_procs):
        ready = ctx.Event()
        proc = ctx.Process(target=clients_process, args=(
            targets[k::n_procs], server.url, token, args.events, args.format == "html",
            ready, go, out))
        proc.start()
        procs.append(proc)
        readies.append(ready)
    began = time.monotonic()
    try:
        for ready in readies:
            if not ready.wait(420):
                raise RuntimeError("the clients did not connect")
        print(f"  {n_clients} clients connected in {time.monotonic() - began:.1f} s", flush=True)
        go.set()
        server_cpu = cpu_seconds(server.proc.pid)
        committed = asyncio.run(publish_events(args, session_ids))
        results = [out.get(timeout=300) for _ in procs]
        server_cpu = cpu_seconds(server.proc.pid) - server_cpu
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    latencies, in_order, dropped, clients_cpu = [], True, [], 0.0
    for sessions_of, received, orders, lost, cpu in results:
        dropped += lost
        clients_cpu += cpu
        for session_id, got, order in zip(sessions_of, received, orders, strict=True):
            expected = sorted(seq for (s, seq) in committed if s == session_id)
            in_order &= order == expected
            latencies += [(at - committed[(session_id, seq)]) * 1000
                          for seq, at in got.items()]
    frames = len(latencies)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    print(f"sessions={len(session_ids)} clients={n_clients} events/session={args.events} "
          f"rate={args.rate}/s format={args.format} client_procs={n_procs} samples={frames}")
    print(f"  event-to-websocket latency: p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
          f"max {max(latencies):.1f} ms (goal p95 < {GOAL_MS} ms)")
    print(f"  every client got every event once and in order: {in_order}; "
          f"clients dropped: {len(dropped)} {dropped[:3]}")
    print(f"  CPU per delivered frame: server {server_cpu / frames * 1e6:.0f} µs, "
          f"clients {clients_cpu / frames * 1e6:.0f} µs", flush=True)
    return {"p50": p50, "p95": p95, "clients": n_clients, "dropped": len(dropped),
            "in_order": in_order, "frames": frames}


def raise_fd_limit() -> None:
    """Each client is a socket in a client process and one in the server (children inherit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run(args) -> dict:
    raise_fd_limit()
    django_setup("amux_bench_timeline")
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from sessions.models import ProviderProfile, Session
    from tests.support.asgi import AsgiServer

    user, _ = get_user_model().objects.get_or_create(username="bench",
                                                     defaults={"is_staff": True})
    _, token = AuthToken.objects.create(user=user)
    provider = ProviderProfile.objects.create(slug="bench-timeline", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    env = {**os.environ, "AMUX_SECRET_KEY": settings.SECRET_KEY,
           "AMUX_DATA_DIR": str(settings.DATA_DIR), "REDIS_URL": settings.REDIS_URL}
    server = AsgiServer(env, workers=args.workers)
    print(f"uvicorn workers={args.workers}: {' '.join(server.ws_args)}", flush=True)
    try:
        sessions = [Session.objects.create(
            runtime="codex", provider=provider, model="m",
            workdir=str(settings.DATA_DIR / "work" / f"bench-{i}")).pk
            for i in range(args.sessions)]
        return measure(args, sessions, token, server)
    finally:
        server.stop()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--per-session", type=int, default=20, help="clients per session")
    p.add_argument("--events", type=int, default=20, help="events per session")
    p.add_argument("--rate", type=float, default=50, help="events per second in all")
    p.add_argument("--procs", type=int, default=2, help="client processes")
    p.add_argument("--format", choices=["json", "html"], default="json",
                   help="html: the panel's fragments")
    p.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    return p


def figures() -> dict[str, dict]:
    from bench._setup import figure

    result = run(parser().parse_args([]))
    met = result["p95"] < GOAL_MS and result["dropped"] == 0 and result["in_order"]
    return {"timeline_p95_ms_1000": figure(
        result["p95"], "ms", f"< {GOAL_MS}, none dropped", met,
        f"{result['clients']} clients on 50 sessions, p50 {result['p50']:.1f} ms, "
        f"{result['dropped']} dropped, every event once and in order: {result['in_order']}")}


if __name__ == "__main__":
    run(parser().parse_args())
