"""From a signed GitHub comment to the worker's first turn started, on a repository that
is already mirrored (goal on this machine: p50 < 1 s, p95 < 2 s).

Each ticket: an `issue_comment` ("@amux-bot please fix …", signed as GitHub signs it) on
a new issue → the webhook stores and admits it → the outbox's dispatch fetches the mirror,
clones the ticket's directory from it on `amux/<short name>`, creates the worker session
and posts its brief → a session host starts the real runtime (Pi) and opens the turn. The
figure is the wall time from sending the webhook to the turn's `started_at`; the model is
the scripted server answering at once, so model time is not in it. The git side is a real
smart-HTTP server (git http-backend) on 127.0.0.1 and GitHub's API the recording server,
so the mirror's fetch and the clone are real git work. Prints figures; not a timed test.

    python bench/first_action.py [--tickets 20] [--files 400] [--runtime codex|pi]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _setup import ROOT, percentile

REPO = "octo/bench-app"
TOKEN = "ghp_bench_token"
SECRET = "bench-secret"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tickets", type=int, default=20)
    parser.add_argument("--files", type=int, default=400,
                        help="files in the repository (about 2 KiB each)")
    parser.add_argument("--runtime", default="codex", choices=["codex", "pi"],
                        help="the worker runtime (Pi's Node start alone takes over 1 s here)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    data = Path(tempfile.mkdtemp(prefix="bench-first-action-"))
    os.environ["AMUX_DATA_DIR"] = str(data)  # from nothing: its own database and mirrors
    from _setup import django_setup

    django_setup()
    try:
        run(args, data)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def run(args, data: Path) -> None:
    from django.conf import settings
    from django.test import Client

    from effects import outbox
    from intake.models import Source
    from intake.sources.github import GitHub
    from policy import services as policy
    from sessions.models import ProviderProfile, Session, Turn
    from tests.support.git_server import GitServer
    from tests.support.github_payloads import example, signed
    from tests.support.model_server import ModelServer, Text
    from tests.support.recording_server import RecordingServer
    from tests.support.sessions import run_host
    from tickets import workspace
    from tickets.models import AgentSettings, Ticket

    settings.WORK_DIR = data / "work"
    settings.AMUX_SESSION_MIN_IDLE_SECONDS = 1
    settings.ALLOWED_HOSTS = ["*"]
    with GitServer(TOKEN) as git_server, RecordingServer() as github, ModelServer() as model:
        github.git = git_server
        files = {f"src/module_{i}.py": "".join(f"value_{i}_{j} = {i * j}\n"
                                                 for j in range(120))
                 for i in range(args.files)}
        git_server.create(REPO, {"README.md": "bench\n", **files})
        config = GitHub.validate_config({"repo": [REPO], "handle": "amux-bot",
                                         "api_url": github.url})
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
        client = Client()

        def one(number: int) -> tuple[float, float]:
            payload = example("issue_comment", "created")
            payload["issue"]["number"] = number
            payload["issue"]["title"] = f"Crash number {number}"
            payload["comment"]["id"] += number
            payload["comment"]["body"] = f"@amux-bot please fix crash {number}"
            payload["comment"]["user"]["login"] = payload["sender"]["login"] = "octocat"
            payload["repository"]["full_name"] = REPO
            github.state.issues[(REPO, number)] = {"title": f"Crash number {number}"}
            model.script(Text("On it."))
            body, headers = signed("issue_comment", payload, SECRET)
            sent = time.time()
            answer = client.post("/hooks/github/bench-gh", data=body,
                                 content_type="application/json", **headers)
            if answer.status_code != 202 or answer.json()["outcome"] != "admitted":
                raise SystemExit(f"webhook answered {answer.status_code} {answer.content!r}")
            outbox.drain(seconds=60)  # the dispatch: mirror fetch, clone, session, brief
            dispatched = time.time()
            ticket = Ticket.objects.get(thread__key=f"{REPO}#{number}")
            if ticket.session_id is None:
                raise SystemExit(f"ticket {ticket.pk} was not dispatched: "
                                 f"{ticket.assignments.last().end_reason}")
            Session.objects.filter(pk=ticket.session_id).update(idle_timeout_s=1)
            run_host(ticket.session_id)  # what the runtime queue's worker runs
            turn = Turn.objects.filter(session_id=ticket.session_id).order_by("seq").first()
            if turn is None or turn.started_at is None:
                raise SystemExit(f"ticket {ticket.pk}: no turn started")
            return turn.started_at.timestamp() - sent, dispatched - sent

        one(1)  # the repository's first ticket makes its mirror (not measured)
        mirror = workspace.mirror_dir(git_server.clone_url(REPO))
        assert (mirror / "HEAD").exists(), mirror
        totals, dispatches = [], []
        for i in range(args.tickets):
            total, dispatch = one(100 + i)
            totals.append(total)
            dispatches.append(dispatch)

    def ms(values, p):
        return percentile(values, p) * 1000

    print(f"runtime={args.runtime} tickets={args.tickets} repository={args.files} files "
          f"(mirror {_size(mirror) / 1e6:.1f} MB)")
    print(f"comment -> dispatched (mirror fetch, clone, session)  p50 {ms(dispatches, 50):7.1f} ms"
          f"  p95 {ms(dispatches, 95):7.1f} ms")
    print(f"comment -> first turn started                         p50 {ms(totals, 50):7.1f} ms"
          f"  p95 {ms(totals, 95):7.1f} ms  (goal p50 < 1000, p95 < 2000)")


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


if __name__ == "__main__":
    main()
