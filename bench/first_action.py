"""From a signed GitHub comment to the worker's first turn started, with 20 tickets opened
within a minute (goal on this machine: p50 < 1 s, p95 < 2 s), on amux's real processes.

The processes are those `amux run` starts: uvicorn serving the web app, a Celery `default`
worker, a `runtime` worker with `amux run`'s process count, and beat — on a scratch
PostgreSQL database and a data directory of their own. The repository (--files files of
about 2 KiB) is served by a real smart-HTTP git server and is mirrored by a first ticket
(not measured). Then --tickets signed `issue_comment` webhooks ("@amux-bot please fix …"),
each on a new issue, are sent evenly over --within seconds; each is stored, answered, and
admitted off-request by the intake drainer the commit wakes; the
outbox's dispatch fetches the mirror, clones the ticket's directory, creates the worker
session and posts its brief, and a session host starts the real runtime and opens the turn.
The figure is the wall time from sending the webhook to the turn's `started_at`; the model
is the scripted server answering at once. Sessions keep their default idle timeout, so an
awake session holds whatever it holds until it falls asleep: that is what is measured.

A ticket whose turn has not started --wait seconds after the last comment is counted as
not started; a percentile that falls on one is not measured (reported as "over N s").

    python -m bench.first_action [--tickets 20] [--within 60] [--wait 90] [--files 400]
                                 [--runtime codex|pi]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import httpx

from bench._setup import django_setup, percentile

REPO = "octo/bench-app"
TOKEN = "ghp_bench_token"
SECRET = "bench-secret"
GOAL_P50_MS, GOAL_P95_MS = 1000, 2000


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--tickets", type=int, default=20)
    p.add_argument("--within", type=float, default=60, help="seconds the comments span")
    p.add_argument("--wait", type=float, default=90,
                   help="seconds after the last comment before a ticket counts as not started")
    p.add_argument("--files", type=int, default=400,
                   help="files in the repository (about 2 KiB each)")
    p.add_argument("--runtime", default="codex", choices=["codex", "pi"])
    return p


def run(args) -> dict:
    data = Path(tempfile.mkdtemp(prefix="bench-first-action-"))
    os.environ["AMUX_DATA_DIR"] = str(data)  # from nothing: its own mirrors and work dirs
    own_redis = not os.environ.get("REDIS_URL")
    try:
        django_setup("amux_bench_first_action")
        return _run(args, data)
    finally:
        if own_redis:
            from amux_site import embedded_redis

            embedded_redis.stop(data)
        shutil.rmtree(data, ignore_errors=True)


def _run(args, data: Path) -> dict:
    import logging

    from intake.models import Source
    from intake.sources.github import GitHub
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.conf import settings

    from amux_site import embedded_redis
    from policy import services as policy
    from sessions import services
    from sessions.hosting import hostname
    from sessions.models import ProviderProfile, Session, Turn
    from tests.support.chaos import Cluster
    from tests.support.git_server import GitServer
    from tests.support.github_payloads import example, signed
    from tests.support.model_server import ModelServer, Text
    from tests.support.recording_server import RecordingServer
    from tests.support.workers import purge_queues, worker_env
    from tickets import workspace
    from tickets.models import AgentSettings, Ticket

    with GitServer(TOKEN) as git_server, RecordingServer() as github, ModelServer() as model:
        github.git = git_server
        github.state.github_token = TOKEN
        model.responder = lambda body: Text("On it.")
        files = {f"src/module_{i}.py": "".join(f"value_{i}_{j} = {i * j}\n"
                                                 for j in range(120))
                 for i in range(args.files)}
        git_server.create(REPO, {"README.md": "bench\n", **files})
        config = GitHub.validate_config({"repo": [REPO], "handle": "amux-bot",
                                         "api_url": github.url, "default_branch": "main"})
        source = Source(kind="github", slug="bench-gh", name="bench", config=config)
        source.secrets = {"webhook_secret": SECRET, "token": TOKEN}
        source.save()
        policy.save({"acceptance": "manual", "sources": {"bench-gh": {
            "allowed": ["octocat"], "rows": {"comment": {"addressed": True}}}}}, None)
        provider = ProviderProfile(slug="bench", platform="openai-compat",
                                   base_url=model.base_url, model_names=["bench-model"])
        provider.secrets = {"api_key": "sk-bench"}
        provider.save()
        AgentSettings.objects.update_or_create(pk=1, defaults={
            "worker_runtime": args.runtime, "worker_provider": provider,
            "worker_model": "bench-model"})
        port = embedded_redis.free_port()
        env = worker_env(data, AMUX_URL=f"http://127.0.0.1:{port}",
                         AMUX_ALLOWED_HOSTS="127.0.0.1,localhost")
        logs = data / "logs"
        logs.mkdir()
        purge_queues()
        cluster = Cluster(env, port, logs, hostname(), runtime_slots=settings.AMUX_SESSION_CAPACITY)
        cluster.start()
        try:
            _wait_web(cluster.url)

            def send(number: int) -> float:
                payload = example("issue_comment", "created")
                payload["issue"]["number"] = number
                payload["issue"]["title"] = f"Crash number {number}"
                payload["comment"]["id"] += number
                payload["comment"]["body"] = f"@amux-bot please fix crash {number}"
                payload["comment"]["user"]["login"] = payload["sender"]["login"] = "octocat"
                payload["repository"]["full_name"] = REPO
                github.state.issues[(REPO, number)] = {"title": f"Crash number {number}"}
                body, django_headers = signed("issue_comment", payload, SECRET)
                headers = {k[5:].replace("_", "-"): v for k, v in django_headers.items()}
                headers["Content-Type"] = "application/json"
                sent = time.time()
                answer = httpx.post(f"{cluster.url}/hooks/github/bench-gh", content=body,
                                    headers=headers, timeout=30)
                # stored and answered; the `default` worker's drainer admits it
                if answer.status_code != 202 or answer.json().get("outcome") != "queued":
                    raise RuntimeError(f"webhook answered {answer.status_code} "
                                       f"{answer.text[:300]}")
                return sent

            def started(number: int) -> float | None:
                ticket = Ticket.objects.filter(thread__key=f"{REPO}#{number}").first()
                if ticket is None or ticket.session_id is None:
                    return None
                turn = (Turn.objects.filter(session_id=ticket.session_id,
                                            started_at__isnull=False).order_by("seq").first())
                return turn.started_at.timestamp() if turn else None

            # The repository's first ticket makes its mirror (not measured); its session is
            # put to sleep so that it holds nothing the measured tickets could use.
            send(1)
            deadline = time.monotonic() + 180
            while started(1) is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("the first ticket's turn did not start in 180 s "
                                       f"(logs in {logs})")
                time.sleep(0.5)
            warm = Ticket.objects.get(thread__key=f"{REPO}#1")
            deadline = time.monotonic() + 60
            while True:  # what the panel's Sleep button does, once its turn has ended
                try:
                    services.sleep(warm.session_id)
                    break
                except services.Conflict:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            while Session.objects.filter(pk=warm.session_id,
                                         lifecycle__in=["running", "idle"]).exists():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            mirror = workspace.mirror_dir(git_server.clone_url(REPO))
            if not (mirror / "HEAD").exists():
                raise RuntimeError(f"no mirror at {mirror}")

            sent: dict[int, float] = {}
            gap = args.within / max(1, args.tickets - 1) if args.tickets > 1 else 0
            first = time.monotonic()
            for i in range(args.tickets):
                time.sleep(max(0.0, first + i * gap - time.monotonic()))
                sent[100 + i] = send(100 + i)
            spread = time.monotonic() - first
            began: dict[int, float] = {}
            deadline = time.monotonic() + args.wait
            while len(began) < len(sent) and time.monotonic() < deadline:
                for number in sent.keys() - began.keys():
                    at = started(number)
                    if at is not None:
                        began[number] = at
                time.sleep(0.5)
        finally:
            cluster.stop()
            purge_queues()
    waits = sorted((began[n] - sent[n]) * 1000 if n in began else math.inf for n in sent)
    late = sum(1 for w in waits if math.isinf(w))
    print(f"runtime={args.runtime} tickets={args.tickets} sent over {spread:.0f} s, "
          f"repository={args.files} files, runtime worker processes "
          f"{settings.AMUX_SESSION_CAPACITY}")
    result = {"tickets": len(waits), "not_started": late, "spread": spread, "wait": args.wait}
    for p in (50, 95):
        value = percentile(waits, p)
        result[f"p{p}"] = None if math.isinf(value) or math.isnan(value) else value
    started_ms = [w for w in waits if not math.isinf(w)]
    print(f"comment -> first turn started: p50 {_ms(result['p50'], args.wait)}, "
          f"p95 {_ms(result['p95'], args.wait)} (goal p50 < {GOAL_P50_MS}, p95 < "
          f"{GOAL_P95_MS}); started {len(started_ms)} of {len(waits)}"
          + (f", fastest {min(started_ms):.0f} ms, slowest {max(started_ms):.0f} ms"
             if started_ms else ""), flush=True)
    return result


def _ms(value: float | None, wait: float) -> str:
    return f"over {wait:.0f} s" if value is None else f"{value:.0f} ms"


def _wait_web(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/healthz", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise RuntimeError("the web server did not answer in 60 s")


def figures() -> dict[str, dict]:
    from bench._setup import figure

    result = run(parser().parse_args([]))
    note = (f"{result['tickets']} tickets over {result['spread']:.0f} s; "
            f"{result['not_started']} had not started {result['wait']:.0f} s after the last")
    out = {}
    for p, goal in ((50, GOAL_P50_MS), (95, GOAL_P95_MS)):
        value = result[f"p{p}"]
        if value is None:
            out[f"first_action_p{p}_ms"] = figure(
                None, "ms", f"< {goal}", False,
                f"over {result['wait']:.0f} s after the last comment: {note}")
        else:
            out[f"first_action_p{p}_ms"] = figure(value, "ms", f"< {goal}", value < goal, note)
    return out


if __name__ == "__main__":
    run(parser().parse_args())
