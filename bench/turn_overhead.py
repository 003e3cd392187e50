"""A turn's wall time through amux over driving the same runtime directly (goal ≤ 1.1).

Direct: one Codex app-server adapter driven by hand. Through amux: the same runtime
under a session host (lease, Redis control channel, every event stored in the canonical
timeline and published), each turn measured from posting the message (what
`POST sessions/<id>/messages` does) to its terminal event reaching a watcher of the
session's timeline (the channel-layer group every websocket of the panel is fed from; the
event is published on commit). Each turn is a
shell tool call then a reply, against the scripted model server answering after
--model-delay seconds per call. Direct and amux turns alternate, so both see the same
machine load.

    python bench/turn_overhead.py [--turns 10] [--model-delay 0.2] [--runtime codex]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _setup import ROOT, django_setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--model-delay", type=float, default=0.2)
    parser.add_argument("--runtime", default="codex", choices=["codex", "pi", "acp"])
    args = parser.parse_args()
    django_setup()
    from channels.layers import get_channel_layer
    from django.conf import settings

    from sessions import services, timeline
    from sessions.apps import TIMELINE_LAYER
    from sessions.host import SessionHost
    from sessions.models import ProviderProfile, Session, TimelineEvent
    from tests.support.model_server import ModelServer, Text, ToolCall
    from tests.support.runtimes import MODEL, adapter_for, collect, make_config

    model = MODEL[args.runtime]

    def script(server: ModelServer, n: int) -> None:
        for i in range(n):
            server.script(ToolCall(f"echo {i} >> log.txt", delay=args.model_delay),
                          Text(f"done {i}", delay=args.model_delay))

    first_call: dict[str, list[float]] = {"direct": [], "amux": []}
    with ModelServer() as server:
        script(server, 2 * (args.turns + 1))
        base = Path(tempfile.mkdtemp(prefix="bench-direct-"))

        # --- direct: the same adapter driven by hand, on its own event loop thread
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()

        def on_direct(coro):
            return asyncio.run_coroutine_threadsafe(coro, loop).result(300)

        adapter = adapter_for(args.runtime, make_config(args.runtime, base, server.base_url))
        on_direct(adapter.start())
        on_direct(collect(adapter, "warm up"))

        # --- through amux: a session host on its own thread, like a Celery worker's
        settings.WORK_DIR = Path(settings.DATA_DIR) / "work"
        Session.objects.filter(provider__slug="bench").delete()
        ProviderProfile.objects.filter(slug="bench").delete()
        provider = ProviderProfile.objects.create(slug="bench", platform="openai-compat",
                                                  base_url=server.base_url)
        provider.secrets = {"api_key": "bench"}
        provider.save()
        session = services.create_session(runtime=args.runtime, provider="bench",
                                          model=model)
        # A watcher of the session's timeline group, as the panel's websockets are fed: the
        # bench waits on published terminal events without polling the database (a poll
        # loop in this process would take the GIL and the database from the host it
        # measures).
        ended: dict[int, threading.Event] = {}
        ended_lock = threading.Lock()

        def event_for(turn_seq: int) -> threading.Event:
            with ended_lock:
                return ended.setdefault(turn_seq, threading.Event())

        watching = threading.Event()

        async def watch() -> None:
            layer = get_channel_layer(TIMELINE_LAYER)
            channel = await layer.new_channel()
            await layer.group_add(timeline.group_name(session.pk), channel)
            watching.set()
            while True:
                message = await layer.receive(channel)
                for item in message.get("events", []):
                    if item["type"] in timeline.TERMINAL_STATE and item["turn"] is not None:
                        event_for(item["turn"]).set()

        threading.Thread(target=lambda: asyncio.run(watch()), daemon=True).start()
        if not watching.wait(30):
            raise SystemExit("could not watch the session's timeline")

        def wait_terminal(turn) -> None:
            if not event_for(turn.seq).wait(120):
                raise SystemExit(f"turn {turn.seq} did not end in 120 s")

        warm = services.post_message(session.pk, "warm up")
        host = SessionHost(session.pk)
        thread = threading.Thread(target=lambda: asyncio.run(host.run()), daemon=True)
        thread.start()
        wait_terminal(warm)
        # Turns alternate between the two so both see the same machine (it is noisy).
        direct_times, amux_times = [], []
        for i in range(args.turns):
            t0, w0 = time.perf_counter(), time.time()
            on_direct(collect(adapter, f"turn {i}"))
            direct_times.append(time.perf_counter() - t0)
            first_call["direct"].append(_first_request_after(server, w0) - w0)

            t0, w0 = time.perf_counter(), time.time()
            turn = services.post_message(session.pk, f"turn {i}")
            wait_terminal(turn)
            amux_times.append(time.perf_counter() - t0)
            first_call["amux"].append(_first_request_after(server, w0) - w0)
        on_direct(adapter.close())
        loop.call_soon_threadsafe(loop.stop)
        services.archive(session.pk)
        thread.join(30)
        events = TimelineEvent.objects.filter(session=session).count()

    d, a = statistics.median(direct_times), statistics.median(amux_times)
    print(f"runtime={args.runtime} turns={args.turns} model_delay={args.model_delay}s "
          f"(2 model calls + 1 shell tool per turn)")
    print(f"direct  median {d * 1000:8.1f} ms   (min {min(direct_times) * 1000:.1f})")
    print(f"amux    median {a * 1000:8.1f} ms   (min {min(amux_times) * 1000:.1f}); "
          f"{events} timeline events stored")
    print(f"ratio amux/direct = {a / d:.3f}  (goal <= 1.1)")
    print("input to first model request, median: direct "
          f"{statistics.median(first_call['direct']) * 1000:.1f} ms, amux "
          f"{statistics.median(first_call['amux']) * 1000:.1f} ms")


def _first_request_after(server, wall: float) -> float:
    return min(r.at for r in server.requests if r.at >= wall)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT))
    main()
