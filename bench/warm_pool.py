"""A new Pi session's first turn with and without the warm pool (sessions/warm_pool.py):
from its first message posted to its first turn started, for `--sessions` new sessions one
after another started cold (AMUX_SESSION_WARM_POOL=0), then as many taking a pre-started
process (the pool at 1, refilled between them), in one run on the same machine, through
amux's session host with the real Pi, amux's model gateway and the scripted model server.

Figures: `warm_first_turn_p50_ms_pi` and `warm_first_turn_ratio_pi` (warm p50 over cold
p50, same run).

    python -m bench.warm_pool [--sessions 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench._setup import django_setup, figure, percentile


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", type=int, default=5)
    return p


def run(args) -> dict[str, dict]:
    data = Path(tempfile.mkdtemp(prefix="bench-warm-"))
    os.environ["AMUX_DATA_DIR"] = str(data)
    own_redis = not os.environ.get("REDIS_URL")
    try:
        django_setup("amux_bench_warm")
        return _run(args, data)
    finally:
        if own_redis:
            from amux_site import embedded_redis

            embedded_redis.stop(data)
        shutil.rmtree(data, ignore_errors=True)


def _run(args, data: Path) -> dict[str, dict]:
    from django.conf import settings

    from sessions import warm_pool
    from sessions.models import ProviderProfile
    from tests.support.isolation import reachable
    from tests.support.model_server import ModelServer, Text
    from tests.support.sessions import gateway_served

    settings.DATA_DIR = data
    settings.WORK_DIR = data / "work"
    settings.WORK_DIR.mkdir(parents=True, exist_ok=True)
    reachable(settings.WORK_DIR)
    with ModelServer() as model, gateway_served(settings):
        model.responder = lambda body: Text("ok")
        provider = ProviderProfile.objects.create(
            slug="scripted", platform="openai-compat", base_url=model.base_url,
            model_names=["scripted-model"])
        provider.secrets = {"api_key": "sk-bench"}
        provider.save()
        load = os.getloadavg()[0]
        settings.AMUX_SESSION_WARM_POOL = 0
        cold = [_first_turn_ms() for _ in range(args.sessions)]
        settings.AMUX_SESSION_WARM_POOL = 1
        _first_turn_ms()  # its launch is asked for once: kept warm from now on
        warm = []
        try:
            for _ in range(args.sessions):
                _wait(lambda: warm_pool.POOL.counts()["idle"] >= 1, 120)
                warm.append(_first_turn_ms())
            hits = warm_pool.POOL.counts()["hits"]
        finally:
            warm_pool.POOL.stop()
    c50, w50 = percentile(cold, 50), percentile(warm, 50)
    note = (f"{args.sessions} new sessions each: cold p50 {c50:.0f} ms (max {max(cold):.0f}), "
            f"warm p50 {w50:.0f} ms (max {max(warm):.0f}), {hits} took a warm process; "
            f"load {load:.2f} on {os.cpu_count()} cores")
    print(note, flush=True)
    return {"warm_first_turn_p50_ms_pi": figure(w50, "ms", "-", None, note),
            "warm_first_turn_ratio_pi": figure(w50 / c50, "x", "-", None,
                                               "warm p50 over cold p50, same run")}


def _first_turn_ms() -> float:
    """A new session, its first message, its host run until it sleeps: ms from the
    message to its first turn started."""
    from sessions import new_session, services
    from sessions.models import Session, Turn
    from tests.support.sessions import run_host

    session = services.create_session(
        new_session.Launch.direct(runtime="pi", provider="scripted", model="scripted-model"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=0)
    posted = time.time()
    services.post_message(session.pk, "hello")
    run_host(session.pk)
    turn = Turn.objects.filter(session=session, started_at__isnull=False).order_by("seq").first()
    if turn is None:
        raise RuntimeError(f"session {session.pk}: no turn started")
    return (turn.started_at.timestamp() - posted) * 1000


def _wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("the warm pool did not refill")
        time.sleep(0.1)


def figures() -> dict[str, dict]:
    return run(parser().parse_args([]))


if __name__ == "__main__":
    for name, fig in run(parser().parse_args()).items():
        print(f"{name}: {fig}")
