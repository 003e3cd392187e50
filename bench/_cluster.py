"""amux's real processes on one already-mirrored repository, for the benches that time a
signed GitHub comment to its worker's first turn (first_action, burst).

The processes are those `amux run` starts: uvicorn serving the web app, a Celery `default`
worker, a `runtime` worker with `amux run`'s process count, and beat — on the scratch
database the bench set up and a data directory of its own. The repository (`files` files
of about 2 KiB) is served by a real smart-HTTP git server, and a first ticket (not
measured) makes its mirror, then sleeps. Each `send` is a signed `issue_comment` webhook
("@amux-bot please fix …") on a new issue; it is stored, answered, and admitted off-request
by the intake drainer the commit wakes; the outbox's dispatch fetches the mirror, clones the
ticket's directory, creates the worker session and posts its brief, and a session host
starts the real runtime and opens the turn. The model is the scripted server answering at
once."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO = "octo/bench-app"
TOKEN = "ghp_bench_token"
SECRET = "bench-secret"


class MirroredCluster:
    def __init__(self, cluster, github, git_server, model, data: Path):
        self.cluster, self.github, self.git_server = cluster, github, git_server
        self.model, self.data = model, data

    @property
    def logs(self) -> Path:
        return self.data / "logs"

    def use_runtime(self, runtime: str) -> None:
        """The runtime the next tickets' workers run (the Agents tab's worker runtime)."""
        from tickets.models import AgentSettings

        AgentSettings.objects.filter(pk=1).update(worker_runtime=runtime)

    def send(self, number: int) -> float:
        """A signed comment asking for work on a new issue `number`; when it was sent."""
        from tests.support.github_payloads import example, signed

        payload = example("issue_comment", "created")
        payload["issue"]["number"] = number
        payload["issue"]["title"] = f"Crash number {number}"
        payload["comment"]["id"] += number
        payload["comment"]["body"] = f"@amux-bot please fix crash {number}"
        payload["comment"]["user"]["login"] = payload["sender"]["login"] = "octocat"
        payload["repository"]["full_name"] = REPO
        self.github.state.issues[(REPO, number)] = {"title": f"Crash number {number}"}
        body, django_headers = signed("issue_comment", payload, SECRET)
        headers = {k[5:].replace("_", "-"): v for k, v in django_headers.items()}
        headers["Content-Type"] = "application/json"
        sent = time.time()
        answer = httpx.post(f"{self.cluster.url}/hooks/github/bench-gh", content=body,
                            headers=headers, timeout=30)
        # stored and answered; the `default` worker's drainer admits it
        if answer.status_code != 202 or answer.json().get("outcome") != "queued":
            raise RuntimeError(f"webhook answered {answer.status_code} {answer.text[:300]}")
        return sent

    def started(self, number: int) -> float | None:
        """When the worker of issue `number` opened its first turn, if it has."""
        from sessions.models import Turn
        from tickets.models import Ticket

        ticket = Ticket.objects.filter(thread__key=f"{REPO}#{number}").first()
        if ticket is None or ticket.session_id is None:
            return None
        turn = (Turn.objects.filter(session_id=ticket.session_id, started_at__isnull=False)
                .order_by("seq").first())
        return turn.started_at.timestamp() if turn else None

    def wait_started(self, numbers, wait: float) -> dict[int, float]:
        """Each of `numbers` whose first turn opened within `wait` seconds: when it did."""
        began: dict[int, float] = {}
        deadline = time.monotonic() + wait
        while len(began) < len(numbers) and time.monotonic() < deadline:
            for number in set(numbers) - began.keys():
                at = self.started(number)
                if at is not None:
                    began[number] = at
            time.sleep(0.2)
        return began

    def sleep_workers(self, numbers, wait: float = 60) -> None:
        """What the panel's Sleep button does to each worker, once its turn has ended; then
        waits until their runtimes are gone, so they hold nothing the next tickets use."""
        from sessions import services
        from sessions.models import Session
        from tickets.models import Ticket

        ids = list(Ticket.objects.filter(thread__key__in=[f"{REPO}#{n}" for n in numbers],
                                         session__isnull=False)
                   .values_list("session_id", flat=True))
        deadline = time.monotonic() + wait
        for session_id in ids:
            while True:
                try:
                    services.sleep(session_id)
                    break
                except services.Conflict:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
        while Session.objects.filter(pk__in=ids, lifecycle__in=["running", "idle"]).exists():
            if time.monotonic() > deadline:
                break
            time.sleep(0.3)


@contextlib.contextmanager
def mirrored_cluster(data: Path, runtime: str, files: int) -> Iterator[MirroredCluster]:
    """The cluster with the repository mirrored (its first ticket run and put to sleep)."""
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.conf import settings

    from amux_site import embedded_redis
    from intake.models import Source
    from intake.sources.github import GitHub
    from policy import services as policy
    from sessions.hosting import hostname
    from sessions.models import ProviderProfile
    from tests.support.chaos import Cluster
    from tests.support.git_server import GitServer
    from tests.support.model_server import ModelServer, Text
    from tests.support.recording_server import RecordingServer
    from tests.support.workers import purge_queues, worker_env
    from tickets import workspace
    from tickets.models import AgentSettings

    with GitServer(TOKEN) as git_server, RecordingServer() as github, ModelServer() as model:
        github.git = git_server
        github.state.github_token = TOKEN
        model.responder = lambda body: Text("On it.")
        content = {f"src/module_{i}.py": "".join(f"value_{i}_{j} = {i * j}\n"
                                                   for j in range(120))
                   for i in range(files)}
        git_server.create(REPO, {"README.md": "bench\n", **content})
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
            "worker_runtime": runtime, "worker_provider": provider,
            "worker_model": "bench-model"})
        port = embedded_redis.free_port()
        env = worker_env(data, AMUX_URL=f"http://127.0.0.1:{port}",
                         AMUX_ALLOWED_HOSTS="127.0.0.1,localhost")
        (data / "logs").mkdir()
        purge_queues()
        cluster = Cluster(env, port, data / "logs", hostname(),
                          runtime_slots=settings.AMUX_SESSION_CAPACITY)
        cluster.start()
        try:
            _wait_web(cluster.url)
            bench = MirroredCluster(cluster, github, git_server, model, data)
            bench.send(1)
            if 1 not in bench.wait_started([1], 180):
                raise RuntimeError(f"the first ticket's turn did not start in 180 s "
                                   f"(logs in {bench.logs})")
            bench.sleep_workers([1])
            mirror = workspace.mirror_dir(git_server.clone_url(REPO))
            if not (mirror / "HEAD").exists():
                raise RuntimeError(f"no mirror at {mirror}")
            yield bench
        finally:
            cluster.stop()
            purge_queues()


def _wait_web(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/healthz", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise RuntimeError("the web server did not answer in 60 s")
