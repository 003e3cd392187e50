"""The milliseconds amux's model gateway adds to a model request (goal: at most 5 ms at the
median and 15 ms at p95 for the whole streamed answer, and the first byte within 5 ms of
the first byte direct).

The provider is the scripted model server (tests/support/model_server.py) in a process of
its own, answering a streamed OpenAI Responses request (a text of 40 deltas). The gateway
is amux's real ASGI app under uvicorn in another process, on a scratch database, with a
real session credential of a worker session: each request through it is authenticated,
checked against the registered caps, given the current worker prompt in place of its
marked block, forwarded with the provider's key, passed back chunk by chunk and its usage
counted. Direct and gateway requests are paired and alternate (the pair's order
swapping each time), both from one keep-alive client, so both see the same machine load.

    python -m bench.gateway [--requests 200]

Figures (each gateway request minus the direct request of its group; direct, through the
gateway and through it without a prompt rotate): gateway_added_ms_p50, gateway_added_ms_p95
(whole answer) and gateway_first_byte_added_ms_p50, for a worker's request (its marked
prompt replaced by the current one); gateway_added_ms_p50_no_prompt for the same request
without a marked prompt.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench._setup import django_setup, percentile

ROOT = Path(__file__).resolve().parents[1]
GOAL_P50, GOAL_P95, GOAL_FIRST = 5.0, 15.0, 5.0
REQUESTS = 200
TEXT = "The scripted model answers this request in forty small pieces. " * 5

_MODEL_SERVER = """
import sys, time
from tests.support.model_server import ModelServer, Text
server = ModelServer().start()
server.responder = lambda body: Text(sys.argv[1])
print(server.port, flush=True)
while True:
    time.sleep(3600)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


def _timed(client, url: str, headers: dict, body: dict) -> tuple[float, float]:
    """(ms to the first byte, ms to the end) of one streamed request."""
    start = time.perf_counter()
    first = None
    with client.stream("POST", url, headers=headers, json=body) as answer:
        if answer.status_code != 200:
            raise RuntimeError(f"{url} answered {answer.status_code}: {answer.read()[:300]!r}")
        for _chunk in answer.iter_raw():
            if first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    return (first - start) * 1000, (end - start) * 1000


def figures(requests: int = REQUESTS) -> dict[str, dict]:
    import httpx

    from bench._setup import figure

    url = django_setup("amux_bench_gateway")
    from django.conf import settings

    from sessions import gateway_rules, model_credentials, new_session, services
    from sessions.models import ProviderProfile

    procs: list[subprocess.Popen] = []
    log = open(Path(os.environ["AMUX_DATA_DIR"]) / "gateway-bench-servers.log", "ab")  # noqa: SIM115
    try:
        model = subprocess.Popen([sys.executable, "-c", _MODEL_SERVER, TEXT[:320]], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=log, text=True)
        procs.append(model)
        model_port = int(model.stdout.readline())
        port = _free_port()
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE":
               "amux_site.settings", "AMUX_LOG_LEVEL": "WARNING"}
        amux = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "amux_site.asgi:application", "--host",
             "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
             "--lifespan", "off"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(amux)
        _wait_port(port, amux, "uvicorn")
        settings.AMUX_URL = f"http://127.0.0.1:{port}"
        Path(settings.WORK_DIR).mkdir(parents=True, exist_ok=True)
        provider = ProviderProfile.objects.create(
            slug="bench", platform="openai-compat", model_names=["gpt-5.5"],
            base_url=f"http://127.0.0.1:{model_port}/v1")
        provider.secrets = {"api_key": "sk-bench-provider"}
        provider.save()
        # a worker's session: every request through the gateway has amux's current worker
        # prompt assembled and put in place of the marked block it carries
        session = services.create_session(
            new_session.Launch.direct(runtime="codex", provider="bench", model="gpt-5.5"),
            new_session.Prompting(prompt_role="worker"))
        token = model_credentials.issue(session.pk)
        body = {"model": "gpt-5.5", "stream": True, "input": "hi",
                "instructions": gateway_rules.mark("the prompt as the turn started"),
                "tools": [{"type": "function", "name": "shell"}]}
        direct = (f"http://127.0.0.1:{model_port}/v1/responses",
                  {"authorization": "Bearer sk-bench-provider"})
        through = (f"{settings.AMUX_URL}/gateway/model/openai/responses",
                   {"authorization": f"Bearer {token}"})
        # the same request without amux's marked prompt (a session with no prompt role):
        # what the gateway costs without assembling the prompt
        plain = {k: v for k, v in body.items() if k != "instructions"}
        first_added, whole_added, plain_added = [], [], []
        with httpx.Client(timeout=30) as client:
            for _ in range(20):  # warm every path (connections, imports, caches)
                _timed(client, *direct, body)
                _timed(client, *through, body)
                _timed(client, *through, plain)
            for i in range(requests):
                runs = [("d", direct, body), ("g", through, body), ("p", through, plain)]
                turn = i % 3  # each path first, second and third in turn
                timed = {name: _timed(client, *target, payload)
                         for name, target, payload in runs[turn:] + runs[:turn]}
                d = timed["d"]
                first_added.append(timed["g"][0] - d[0])
                whole_added.append(timed["g"][1] - d[1])
                plain_added.append(timed["p"][1] - d[1])
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        log.close()
    p50, p95 = percentile(whole_added, 50), percentile(whole_added, 95)
    first = percentile(first_added, 50)
    plain50 = percentile(plain_added, 50)
    load = os.getloadavg()[0]
    note = (f"{requests} paired streamed requests with the worker prompt applied; "
            f"without a prompt {plain50:.2f} ms p50; 1-min load {load:.2f}")
    print(f"gateway: added {p50:.2f} ms p50, {p95:.2f} ms p95 (whole answer); first byte "
          f"+{first:.2f} ms p50 ({note})")
    return {
        "gateway_added_ms_p50_no_prompt": figure(plain50, "ms", "", None, note),
        "gateway_added_ms_p50": figure(p50, "ms", f"<= {GOAL_P50:g}", p50 <= GOAL_P50, note),
        "gateway_added_ms_p95": figure(p95, "ms", f"<= {GOAL_P95:g}", p95 <= GOAL_P95, note),
        "gateway_first_byte_added_ms_p50": figure(first, "ms", f"<= {GOAL_FIRST:g}",
                                                  first <= GOAL_FIRST, note),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=REQUESTS)
    args = parser.parse_args()
    for name, fig in figures(args.requests).items():
        print(f"{name}: {fig}")


if __name__ == "__main__":
    main()
