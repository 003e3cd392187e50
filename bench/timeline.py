"""Event-to-websocket latency of the canonical timeline with many clients attached.

Starts the real ASGI app (uvicorn, Channels, Redis channel layer), attaches --clients
websocket clients to one session's timeline, then stores --events events the way the
session host does (one committed transaction each, published from a long-lived event loop)
and measures, per client and event, the time from the commit returning to the client
receiving it. Prints p50/p95/max (goal p95 < 50 ms with 100 clients) and checks that every
client saw every event once, in order.

    python bench/timeline.py [--clients 100] [--events 200] [--rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from _setup import django_setup, percentile


def clients_process(url: str, origin: str, n_clients: int, n_events: int, ready, out) -> None:
    """The websocket clients, in their own process and event loop."""
    import websockets

    async def go() -> None:
        received: list[dict[int, float]] = [{} for _ in range(n_clients)]
        orders: list[list[int]] = [[] for _ in range(n_clients)]
        opened = 0

        async def client(i: int, connected: asyncio.Event) -> None:
            nonlocal opened
            async with websockets.connect(url, origin=origin, open_timeout=60,
                                          max_queue=None) as ws:
                json.loads(await ws.recv())  # snapshot
                connected.set()
                while len(orders[i]) < n_events:
                    data = json.loads(await ws.recv())
                    received[i][data["seq"]] = time.time()
                    orders[i].append(data["seq"])

        events = [asyncio.Event() for _ in range(n_clients)]
        tasks = []
        for i in range(n_clients):
            tasks.append(asyncio.create_task(client(i, events[i])))
            if i % 20 == 19:
                await asyncio.sleep(0.2)
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 120)
        ready.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
        out.put((received, orders))

    asyncio.run(go())


async def publish_events(args, session_id: int) -> dict[int, float]:
    from channels.layers import get_channel_layer

    from sessions import timeline
    from sessions.apps import TIMELINE_LAYER
    from sessions.runtimes.events import ErrorObserved

    layer = get_channel_layer(TIMELINE_LAYER)
    committed: dict[int, float] = {}
    for n in range(args.events):
        stored = await asyncio.to_thread(
            timeline.record, session_id, None,
            [ErrorObserved(code="bench", message=str(n))], publish_after_commit=False)
        committed[stored[0]["seq"]] = time.time()
        await layer.group_send(timeline.group_name(session_id),
                               timeline.group_message(stored))
        await asyncio.sleep(1 / args.rate)
    return committed


def run(args, session_id: int, token: str, server) -> None:  # noqa: C901
    import multiprocessing

    from sessions import timeline

    start_seq = timeline.last_seq(session_id)
    url = (f"{server.ws_url}/ws/sessions/{session_id}/timeline?after={start_seq}"
           f"&token={token}")
    ctx = multiprocessing.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=clients_process, args=(url, server.url, args.clients,
                                                     args.events, ready, out))
    proc.start()
    try:
        if not ready.wait(180):
            raise RuntimeError("the clients did not connect")
        committed = asyncio.run(publish_events(args, session_id))
        received, orders = out.get(timeout=300)
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    latencies = [(got[seq] - committed[seq]) * 1000 for got in received for seq in committed]
    expected = sorted(committed)
    in_order = all(o == expected for o in orders)
    print(f"clients={args.clients} events={args.events} rate={args.rate}/s "
          f"uvicorn_workers={args.workers} "
          f"samples={len(latencies)}")
    print(f"event-to-websocket latency: p50 {percentile(latencies, 50):.1f} ms, "
          f"p95 {percentile(latencies, 95):.1f} ms, max {max(latencies):.1f} ms "
          "(goal p95 < 50 ms)")
    print(f"every client got every event once and in order: {in_order}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    args = parser.parse_args()
    django_setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from sessions.models import ProviderProfile, Session
    from tests.support.asgi import AsgiServer

    user, _ = get_user_model().objects.get_or_create(username="bench",
                                                     defaults={"is_staff": True})
    token, _ = Token.objects.get_or_create(user=user)
    provider, _ = ProviderProfile.objects.get_or_create(
        slug="bench-timeline", defaults={"platform": "openai-compat",
                                         "base_url": "http://127.0.0.1:9/v1"})
    session = Session.objects.create(runtime="codex", provider=provider, model="m",
                                     workdir=str(settings.DATA_DIR / "work" / "bench"))
    env = {**os.environ, "AMUX_SECRET_KEY": settings.SECRET_KEY,
           "AMUX_DATA_DIR": str(settings.DATA_DIR), "REDIS_URL": settings.REDIS_URL}
    server = AsgiServer(env, workers=args.workers)
    try:
        run(args, session.pk, token.key, server)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
