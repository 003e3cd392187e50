"""The milliseconds amux adds to a turn over driving the same runtime directly (goal: at
most 10 ms at the median, 25 ms at the 95th percentile; issue 35), for Codex (app-server),
Pi (RPC) and an ACP agent (codex-acp).

Direct: the runtime's adapter driven by hand. Through amux: the same runtime
under a session host (lease, Redis control channel, every event stored in the canonical
timeline and published), each turn measured from posting the message (what
`POST sessions/<id>/messages` does) to the transaction storing its terminal event
committed (the bench notes when the host's `timeline.record` of that batch returns).
Both sides run in a fresh temporary work directory, outside any git checkout.
Each turn is a
shell tool call then a reply, against the scripted model server answering after
--model-delay seconds per call. Direct and amux turns are paired and alternate, the
pair's order swapping each time (direct first, then amux first), so both see the same
machine load and neither always runs right after the other.

    python -m bench.turn_overhead [--turns 20] [--model-delay 0.2] [--runtime all|codex|pi|acp]

Figures: amux's added milliseconds per turn (each amux turn minus the direct turn of its
pair, same script and model delay), p50 and p95 per runtime, and the worst runtime's as
turn_added_ms_p50/_p95; each note gives the 1-minute load when the runtime was measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench._setup import django_setup, percentile

RUNTIMES = ("codex", "pi", "acp")
GOAL_MS = 10  # p50
GOAL_P95_MS = 25
TURNS = 20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--model-delay", type=float, default=0.2)
    parser.add_argument("--runtime", default="all", choices=["all", *RUNTIMES])
    args = parser.parse_args()
    runtimes = RUNTIMES if args.runtime == "all" else (args.runtime,)
    for name, fig in figures(runtimes, args.turns, args.model_delay).items():
        print(f"{name}: {fig}")


def figures(runtimes=RUNTIMES, turns: int = TURNS, model_delay: float = 0.2
            ) -> dict[str, dict]:
    """Added ms per turn (p50, p95 of amux minus direct, pairs alternating) per runtime;
    turn_added_ms_p50/_p95 are the worst runtime's."""
    from bench._setup import figure

    django_setup("amux_bench_turns")
    from amux_site import gc_startup

    gc_startup.freeze_loaded()  # as the runtime worker does once it is ready
    out: dict[str, dict] = {}
    failed = []
    for runtime in runtimes:
        try:
            load = os.getloadavg()[0]
            added = measure(runtime, turns, model_delay)
        except Exception as exc:  # one runtime failing leaves the others measured
            failed.append(f"{runtime}: {type(exc).__name__}: {exc}")
            for q in ("p50", "p95"):
                out[f"turn_added_ms_{q}_{runtime}"] = figure(
                    None, "ms", f"<= {GOAL_MS if q == 'p50' else GOAL_P95_MS}", None,
                    f"not measured: {type(exc).__name__}: {exc}")
            continue
        p50, p95 = percentile(added, 50), percentile(added, 95)
        out[f"turn_added_ms_p50_{runtime}"] = figure(
            p50, "ms", f"<= {GOAL_MS}", p50 <= GOAL_MS,
            f"{turns} turn pairs, load {load:.2f} on {os.cpu_count()} cores")
        out[f"turn_added_ms_p95_{runtime}"] = figure(p95, "ms", f"<= {GOAL_P95_MS}",
                                                     p95 <= GOAL_P95_MS)
    measured = [r for r in runtimes if out[f"turn_added_ms_p50_{r}"]["value"] is not None]
    if failed:
        note = "not measured: " + "; ".join(failed)
        out["turn_added_ms_p50"] = figure(None, "ms", f"<= {GOAL_MS}", None, note)
        out["turn_added_ms_p95"] = figure(None, "ms", f"<= {GOAL_P95_MS}", None, note)
    else:
        worst = max(measured, key=lambda r: out[f"turn_added_ms_p50_{r}"]["value"])
        p50 = out[f"turn_added_ms_p50_{worst}"]["value"]
        out["turn_added_ms_p50"] = figure(p50, "ms", f"<= {GOAL_MS}", p50 <= GOAL_MS,
                                          f"worst runtime: {worst}")
        worst95 = max(measured, key=lambda r: out[f"turn_added_ms_p95_{r}"]["value"])
        p95 = out[f"turn_added_ms_p95_{worst95}"]["value"]
        out["turn_added_ms_p95"] = figure(p95, "ms", f"<= {GOAL_P95_MS}", p95 <= GOAL_P95_MS,
                                          f"worst runtime: {worst95}")
    return out


def measure(runtime: str, turns: int, model_delay: float) -> list[float]:
    """Alternating turns, direct then through amux; the ms amux added to each pair."""
    from django.conf import settings

    from sessions import new_session, services, timeline
    from sessions.host import SessionHost
    from sessions.models import ProviderProfile, Session, TimelineEvent
    from tests.support.model_server import ModelServer, Text, ToolCall
    from tests.support.runtimes import MODEL, adapter_for, collect, make_config
    from tests.support.sessions import gateway_served

    model = MODEL[runtime]

    def script(server: ModelServer, n: int) -> None:
        for i in range(n):
            server.script(ToolCall(f"echo {i} >> log.txt", delay=model_delay),
                          Text(f"done {i}", delay=model_delay))

    first_call: dict[str, list[float]] = {"direct": [], "amux": []}
    # amux's session reaches the provider only through amux's model gateway, served here
    # as `amux run` serves it (the direct side calls the provider itself)
    with ModelServer() as server, gateway_served(settings):
        script(server, 2 * (turns + 1))
        base = Path(tempfile.mkdtemp(prefix="bench-direct-"))

        # --- direct: the same adapter driven by hand, on its own event loop thread
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()

        def on_direct(coro):
            return asyncio.run_coroutine_threadsafe(coro, loop).result(300)

        adapter = adapter_for(runtime, make_config(runtime, base, server.base_url))
        on_direct(adapter.start())
        on_direct(collect(adapter, "warm up"))

        # --- through amux: a session host on its own thread, like a Celery worker's
        # The session's work directory is a fresh temporary one, like the direct side's:
        # under the data directory (var/bench, inside this git checkout) Codex and
        # codex-acp read the enclosing repository's git state at every turn start: time
        # only the amux side paid (~15 ms to Codex's first model request), not amux's own.
        from tests.support.isolation import reachable

        settings.WORK_DIR = reachable(Path(tempfile.mkdtemp(prefix="bench-amux-"))) / "work"
        slug = f"bench-{runtime}"
        Session.objects.filter(provider__slug=slug).delete()
        ProviderProfile.objects.filter(slug=slug).delete()
        provider = ProviderProfile.objects.create(slug=slug, platform="openai-compat",
                                                  base_url=server.base_url)
        provider.secrets = {"api_key": "bench"}
        provider.save()
        session = services.create_session(
            new_session.Launch.direct(runtime=runtime, provider=slug, model=model))
        # The terminal event committed: timeline.record (what the host's writer calls to
        # store a batch, in one transaction) is wrapped to note when a batch holding the
        # turn's terminal event has returned, i.e. committed (and its publish queued). No
        # poll loop in this process takes the GIL or the database from the host it measures.
        ended: dict[int, threading.Event] = {}
        ended_lock = threading.Lock()

        def event_for(turn_id: int) -> threading.Event:
            with ended_lock:
                return ended.setdefault(turn_id, threading.Event())

        record = timeline.record

        spent: dict[str, list[float]] = {"batches": [], "terminal": []}

        def noting_record(session_id, turn_id, runtime_events):
            runtime_events = list(runtime_events)
            began = time.perf_counter()
            stored = record(session_id, turn_id, runtime_events)
            took = (time.perf_counter() - began) * 1000
            spent["batches"].append(took)
            if turn_id is not None and any(e.terminal for e in runtime_events):
                spent["terminal"].append(took)
                event_for(turn_id).set()
            return stored

        timeline.record = noting_record
        # The host's other steps of a turn, timed the same way (each calls the real one).
        from sessions import host as host_module

        originals = {(owner, attr): getattr(owner, attr) for owner, attr in (
            (host_module, "_next_input"), (services, "turn_prompt"), (timeline, "start_turn"))
            if hasattr(owner, attr)}
        for (owner, attr), fn in originals.items():
            spent[attr] = []
            setattr(owner, attr, _timed(fn, spent[attr]))
        spent["post_message"] = []

        def wait_terminal(turn) -> None:
            if not event_for(turn.pk).wait(120):
                raise RuntimeError(f"turn {turn.seq} did not end in 120 s")

        warm = services.post_message(session.pk, "warm up")
        host = SessionHost(session.pk)
        thread = threading.Thread(target=lambda: asyncio.run(host.run()), daemon=True)
        thread.start()
        try:
            wait_terminal(warm)
            # Turns alternate between the two so both see the same machine (it is noisy).
            direct_times, amux_times = [], []
            last_call: dict[str, list[float]] = {"direct": [], "amux": []}
            def direct_turn(i: int) -> None:
                t0, w0 = time.perf_counter(), time.time()
                on_direct(collect(adapter, f"turn {i}"))
                direct_times.append(time.perf_counter() - t0)
                first_call["direct"].append(_first_request_after(server, w0) - w0)
                last_call["direct"].append(time.time() - _last_request_before(server, w0))

            def amux_turn(i: int) -> None:
                t0, w0 = time.perf_counter(), time.time()
                turn = services.post_message(session.pk, f"turn {i}")
                spent["post_message"].append((time.perf_counter() - t0) * 1000)
                wait_terminal(turn)
                amux_times.append(time.perf_counter() - t0)
                first_call["amux"].append(_first_request_after(server, w0) - w0)
                last_call["amux"].append(time.time() - _last_request_before(server, w0))

            for i in range(turns):
                for run in ((direct_turn, amux_turn) if i % 2 == 0 else (amux_turn, direct_turn)):
                    run(i)
                    # what one turn left running settles, and the host gives its database
                    # connection back (host.HOLD_SECONDS): each amux turn starts cold
                    time.sleep(0.25)
        finally:
            on_direct(adapter.close())
            loop.call_soon_threadsafe(loop.stop)
            services.archive(session.pk)
            thread.join(30)
            timeline.record = record
            for (owner, attr), fn in originals.items():
                setattr(owner, attr, fn)
        events = TimelineEvent.objects.filter(session=session).count()

    d, a = statistics.median(direct_times), statistics.median(amux_times)
    added = [(am - di) * 1000 for am, di in zip(amux_times, direct_times, strict=True)]
    print(f"runtime={runtime} turns={turns} model_delay={model_delay}s "
          f"(2 model calls + 1 shell tool per turn)")
    print(f"  direct  median {d * 1000:8.1f} ms   (min {min(direct_times) * 1000:.1f})")
    print(f"  amux    median {a * 1000:8.1f} ms   (min {min(amux_times) * 1000:.1f}); "
          f"{events} timeline events stored")
    print(f"  added per turn: p50 {percentile(added, 50):.1f} ms, p95 "
          f"{percentile(added, 95):.1f} ms (goal p50 <= {GOAL_MS}, p95 <= {GOAL_P95_MS} ms); "
          f"ratio {a / d:.3f}")
    print("  input to first model request, median: direct "
          f"{statistics.median(first_call['direct']) * 1000:.1f} ms, amux "
          f"{statistics.median(first_call['amux']) * 1000:.1f} ms; last model request to the "
          f"turn's end, median: direct {statistics.median(last_call['direct']) * 1000:.1f} ms,"
          f" amux {statistics.median(last_call['amux']) * 1000:.1f} ms", flush=True)
    print(f"  the host's timeline.record: {len(spent['batches'])} batches, median "
          f"{statistics.median(spent['batches']):.1f} ms; the terminal batch median "
          f"{statistics.median(spent['terminal']):.1f} ms; per turn, median: "
          + ", ".join(f"{k} {statistics.median(v):.1f} ms" for k, v in spent.items()
                      if k not in ("batches", "terminal") and v), flush=True)
    return added


def _timed(fn, into: list[float]):
    def timed(*args, **kwargs):
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            into.append((time.perf_counter() - began) * 1000)
    return timed


def _first_request_after(server, wall: float) -> float:
    return min(r.at for r in server.requests if r.at >= wall)


def _last_request_before(server, wall: float) -> float:
    """The arrival of the turn's last model request (the turn began at `wall`)."""
    return max(r.at for r in server.requests if r.at >= wall)


if __name__ == "__main__":
    main()
