"""Proof under faults: ticket lifecycles while a killer SIGKILLs amux's own processes.

Each lifecycle is what a team does on GitHub, sent as signed webhooks to a real web server
(uvicorn serving amux_site.asgi): "@amux-bot please fix …" from an allowed login opens a
ticket; a real Celery `default` worker dispatches it; a real `runtime` worker's session host
runs the real Pi runtime (node_modules/.bin/pi) against the scripted model server, and Pi's
scripted turn calls `amux reply`, `amux pr` and `amux report done`; a later follow-up comment
gets a second turn (`amux reply`, `amux report done`); the pull request's merge ends the
ticket. GitHub is the recording server, reached through PyGithub. Beat runs the periodic
sweeps (outbox, session leases) that recover killed work; it is the one process spared.

Meanwhile a killer thread SIGKILLs, at random moments, the web server, the `default` worker,
the whole `runtime` worker with its runtimes, or the session hosts alone (the `runtime`
worker's process, whose threads are the hosts, leaving its runtimes behind as a crashed
host does), and starts what it killed again. GitHub redelivers a webhook that got no answer (same
delivery id); the scripted model retries an `amux` command that failed, as a model does.

After the last lifecycle the processes are left alone until the outbox and the timelines
settle, then three figures are counted (goal 0, 0, 0):

* lost effects — outbox rows left undone or dead, plus replies, pull requests and endings
  a lifecycle asked for that never happened;
* duplicated outbound messages — POSTs to the recording GitHub beyond one per message
  (comments by visible text, pull requests by head branch);
* turns without exactly one terminal event — per turn, from the timeline.

`make chaos` runs 50 lifecycles (`python -m tests.support.chaos`); the suite runs 5
(tests/e2e/test_chaos.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.model_server import ModelServer, Text, ToolCall

ROOT = Path(__file__).resolve().parents[2]
REPO = "Codertocat/Hello-World"
SECRET = "chaos-webhook-secret"
FIRST_ISSUE = 100
MAX_TRIES = 12  # the scripted model's attempts at one `amux` command before it gives up
TAG = re.compile(r"\[chaos (\d+)\.(\d)\]")
OK = "CHAOS-OK"  # printed by a command only when its `amux` call succeeded


# ------------------------------------------------------------------ the scripted model
def _plan(n: int, turn: int) -> list[tuple[str, str]]:
    if turn == 1:
        return [("reply", f"amux reply 'ack {n}.1'"),
                # the worker's own branch (amux/<ticket name>): amux pushes it if needed
                ("pr", f"amux pr 'Fix bug {n}' --head \"$(git branch --show-current)\" "
                       f"--body 'Fixes bug {n}'"),
                ("report", f"amux report done 'done {n}.1'")]
    return [("reply", f"amux reply 'ack {n}.{turn}'"),
            ("report", f"amux report done 'done {n}.{turn}'")]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _calls(message: dict[str, Any]) -> str:
    return json.dumps(message.get("tool_calls") or [])


def respond(body: dict[str, Any]) -> Text | ToolCall:
    """The model's next step, from the conversation alone: the last person's message names
    the lifecycle and turn ("[chaos 7.2]"); each step of that turn's plan runs until its
    command printed the success marker. A turn replayed after a crash sees what its earlier
    run already did (when the runtime kept it) and does only the rest, as a model would."""
    messages = body.get("messages") or []
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return Text("Nothing to do.")
    tags = TAG.findall(_text(messages[users[-1]]))
    if not tags:
        return Text("Nothing to do.")
    n, turn = int(tags[-1][0]), int(tags[-1][1])
    # A continuation after a crash repeats the input: the turn's work so far is everything
    # since the first message that carried this tag.
    first = next(i for i in users if f"[chaos {n}.{turn}]" in _text(messages[i]))
    after = messages[first + 1:]
    results = "\n".join(_text(m) for m in after if m.get("role") == "tool")
    calls = "\n".join(_calls(m) for m in after if m.get("role") == "assistant")
    for name, command in _plan(n, turn):
        marker = f"{OK}-{n}.{turn}-{name}"
        if marker in results:
            continue
        # The command spells the marker so that only its output holds it literally.
        spelled = f"{OK}-{n}.{turn}-$(printf %s {name})"
        tries = calls.count(f"$(printf %s {name})")
        if tries >= MAX_TRIES:
            continue
        wait = "sleep 2; " if tries else ""
        return ToolCall(f"{wait}{command} && echo {spelled}")
    return Text(f"Finished [{n}.{turn}].")


# ------------------------------------------------------------------ processes
class Proc:
    """One of amux's processes, in a process group of its own so a kill takes its
    children (a worker's prefork pool and the runtimes it started) with it."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path):
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.orphans: list[int] = []  # process groups of earlier starts, left running

    def start(self) -> None:
        self.starts += 1
        with open(self.log, "ab") as out:
            out.write(f"\n--- start {self.starts} ---\n".encode())
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(20)

    def stop(self) -> None:
        if self.alive():
            self.kill(signal.SIGTERM)
        if self.alive():
            self.kill(signal.SIGKILL)
        # Whatever the pool left behind (runtimes started in the group) goes too.
        for group in [*self.orphans, *([self.proc.pid] if self.proc is not None else [])]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)

    def kill_hosts(self) -> int | None:
        """SIGKILL the runtime worker's own process, where the session hosts run as
        threads, but not its runtimes: they are left running without a host, the way a
        crashed host leaves them, until a new host finds them by their tag and ends them.
        Started again like the others."""
        if not self.alive():
            return None
        pid = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(20)
        self.orphans.append(pid)  # its process group still holds the runtimes
        return pid


def _celery(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "amux_site", *args]


class Cluster:
    """amux's processes for one chaos run: web, `default` worker, `runtime` worker, beat."""

    def __init__(self, env: dict[str, str], port: int, logs: Path, host: str,
                 runtime_slots: int):
        self.port = port
        worker = ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"]
        self.procs = {
            "web": Proc("web", [sys.executable, "-m", "uvicorn", "amux_site.asgi:application",
                                "--host", "127.0.0.1", "--port", str(port),
                                "--no-access-log"], env, logs / "web.log"),
            "default": Proc("default", _celery("worker", "-Q", "default", "-c", "2",
                                               "-n", f"default@{host}", *worker),
                            env, logs / "default.log"),
            # as `amux run` starts it: one process, a thread per awake session
            "runtime": Proc("runtime", _celery("worker", "-Q", f"runtime,runtime.{host}",
                                               "-P", "threads", "-c", str(runtime_slots),
                                               "-n", f"runtime@{host}", *worker),
                            env, logs / "runtime.log"),
            "beat": Proc("beat", _celery("beat", "-l", "INFO", "-s",
                                         str(logs / "celerybeat-schedule")),
                         env, logs / "beat.log"),
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        for proc in self.procs.values():
            proc.start()

    def revive(self) -> None:
        for proc in self.procs.values():
            if not proc.alive():
                proc.start()

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.stop()


class Killer(threading.Thread):
    """SIGKILLs a random one of web / default worker / runtime worker at random moments,
    then starts it again after a short outage. Session hosts are threads of the runtime
    worker, so a host dies with it: each runtime kill takes, at random, either the worker
    with its runtimes ("runtime") or the worker's process alone, leaving its runtimes
    running without a host ("host") — the two ways hosts die."""

    TARGETS = ("web", "default", "runtime")

    def __init__(self, cluster: Cluster, rng: random.Random, interval: tuple[float, float]):
        super().__init__(name="chaos-killer", daemon=True)
        self.cluster, self.rng, self.interval = cluster, rng, interval
        self.halt = threading.Event()
        self.kills: Counter[str] = Counter()

    def run(self) -> None:
        deck: list[str] = []
        while not self.halt.wait(self.rng.uniform(*self.interval)):
            # Every target in turn, in a random order each round: three kills hit all three.
            if not deck:
                deck = self.rng.sample(self.TARGETS, len(self.TARGETS))
            target = deck.pop()
            if target == "runtime" and self.rng.random() < 0.5:
                runtime = self.cluster.procs["runtime"]
                if runtime.kill_hosts():
                    self.kills["host"] += 1
                    self.halt.wait(self.rng.uniform(0.2, 2.0))
                    runtime.start()
                continue
            proc = self.cluster.procs[target]
            proc.kill()
            self.kills[target] += 1
            self.halt.wait(self.rng.uniform(0.2, 2.0))
            proc.start()


# ------------------------------------------------------------------ GitHub's side
def _comment(issue: int, comment_id: int, text: str) -> dict:
    from tests.support.github_payloads import example

    payload = example("issue_comment", "created")
    payload["issue"]["number"] = issue
    payload["issue"]["title"] = f"Bug {issue}"
    payload["comment"]["id"] = comment_id
    payload["comment"]["body"] = text
    payload["comment"]["user"]["login"] = "octocat"
    payload["sender"]["login"] = "octocat"
    return payload


def _merged(number: int, branch: str) -> dict:
    from tests.support.github_payloads import example

    payload = example("pull_request", "closed")
    payload["number"] = number
    payload["pull_request"]["number"] = number
    payload["pull_request"]["merged"] = True
    payload["pull_request"]["state"] = "closed"
    payload["pull_request"]["head"]["ref"] = branch
    return payload


def deliver(url: str, event: str, payload: dict, deadline: float) -> int:
    """POST a signed webhook as GitHub does, redelivering it (same delivery id) while the
    web server does not answer."""
    from tests.support.github_payloads import signed

    body, django_headers = signed(event, payload, SECRET, delivery=str(uuid.uuid4()))
    headers = {k[5:].replace("_", "-"): v for k, v in django_headers.items()}
    headers["Content-Type"] = "application/json"
    while True:
        try:
            answer = httpx.post(f"{url}/hooks/github/gh", content=body, headers=headers,
                                timeout=10)
            if answer.status_code < 500:
                return answer.status_code
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"webhook {event} never answered")
        time.sleep(0.5)


# ------------------------------------------------------------------ one run
@dataclass
class Result:
    lifecycles: int
    lost: int = 0
    duplicates: int = 0
    bad_turns: int = 0
    kills: dict[str, int] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicates == 0 and self.bad_turns == 0

    def summary(self) -> str:
        kills = ", ".join(f"{k} {v}" for k, v in sorted(self.kills.items())) or "none"
        lines = [f"chaos: {self.lifecycles} lifecycles in {self.seconds:.0f} s; "
                 f"SIGKILLs: {kills}",
                 f"lost effects: {self.lost}",
                 f"duplicated outbound messages: {self.duplicates}",
                 f"turns without exactly one terminal event: {self.bad_turns}"]
        return "\n".join(lines + [f"  - {d}" for d in self.details])


def _world(github_url: str, model_url: str) -> None:
    from intake.models import Source
    from intake.sources.github import GitHub
    from policy import services as policy
    from sessions.models import ProviderProfile
    from tickets.models import AgentSettings

    config = GitHub.validate_config({"repo": [REPO], "handle": "amux-bot",
                                     "api_url": github_url, "default_branch": "main"})
    source = Source(kind="github", slug="gh", name="GitHub", config=config)
    source.secrets = {"webhook_secret": SECRET, "token": "ghp_chaos"}
    source.save()
    policy.save({"acceptance": "manual", "sources": {"gh": {
        "allowed": ["octocat"], "rows": {"comment": {"addressed": True}}}}}, None)
    provider = ProviderProfile(slug="scripted", platform="openai-compat", base_url=model_url,
                               model_names=["scripted-model"])
    provider.secrets = {"api_key": "sk-chaos"}
    provider.save()
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "scripted-model"})


class Lifecycle(threading.Thread):
    def __init__(self, n: int, url: str, github, timeout: float):
        super().__init__(name=f"lifecycle-{n}", daemon=True)
        self.n, self.url, self.github, self.timeout = n, url, github, timeout
        self.issue = FIRST_ISSUE + n
        self.failure = ""

    def _wait(self, what: str, predicate) -> Any:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                value = predicate()
            except Exception:  # noqa: BLE001 - the database may be busy; look again
                value = None
            if value:
                return value
            time.sleep(0.5)
        raise TimeoutError(f"lifecycle {self.n}: {what} not reached in {self.timeout:.0f} s")

    def _commented(self, text: str) -> bool:
        return any(isinstance(r.body, dict) and str(r.body.get("body", "")).startswith(text)
                   for r in self.github.matching("POST", rf"/repos/{REPO}/issues/"
                                                 rf"{self.issue}/comments"))

    def _reported(self, ticket_id: int, text: str) -> bool:
        from tickets.models import Report

        return Report.objects.filter(ticket_id=ticket_id, status="done",
                                     text=text).exists()

    def run(self) -> None:
        from django.db import connection

        from tickets.models import Ticket

        try:
            self._run(Ticket)
        except Exception as exc:  # noqa: BLE001 - reported as this lifecycle's failure
            self.failure = str(exc) or type(exc).__name__
        finally:
            connection.close()

    def _run(self, ticket_model) -> None:
        n, deadline = self.n, time.monotonic() + self.timeout
        status = deliver(self.url, "issue_comment",
                         _comment(self.issue, 10_000 + 2 * n,
                                  f"@amux-bot please fix bug {n} [chaos {n}.1]"), deadline)
        if status not in (200, 202):
            raise RuntimeError(f"lifecycle {n}: the request was answered {status}")
        ticket = self._wait("ticket", lambda: ticket_model.objects.filter(
            thread__key=f"{REPO}#{self.issue}").first())
        self._wait("first reply", lambda: self._commented(f"ack {n}.1"))
        self._wait("first report", lambda: self._reported(ticket.pk, f"done {n}.1"))
        pr_url = self._wait("pull request", lambda: ticket_model.objects.get(
            pk=ticket.pk).pr_url)

        deliver(self.url, "issue_comment",
                _comment(self.issue, 10_001 + 2 * n, f"also check the logout [chaos {n}.2]"),
                time.monotonic() + self.timeout)
        self._wait("second reply", lambda: self._commented(f"ack {n}.2"))
        self._wait("second report", lambda: self._reported(ticket.pk, f"done {n}.2"))

        number = int(pr_url.rstrip("/").rsplit("/", 1)[1])
        branch = f"amux/{ticket_model.objects.get(pk=ticket.pk).short_name}"
        deliver(self.url, "pull_request", _merged(number, branch),
                time.monotonic() + self.timeout)
        self._wait("ended", lambda: ticket_model.objects.get(pk=ticket.pk).ended_at)


def _settled() -> bool:
    from effects.models import Effect
    from sessions.models import Lifecycle as SessionLifecycle
    from sessions.models import Session, Turn

    return (not Effect.objects.exclude(state="dead").exists()
            and not Turn.objects.filter(state__in=["queued", "running"]).exists()
            and not Session.objects.filter(
                lifecycle__in=[SessionLifecycle.RUNNING, SessionLifecycle.IDLE]).exists())


def _dump(logs: Path, github, model: ModelServer) -> None:
    """What GitHub and the model saw, for whoever reads a failure."""
    with open(logs / "github.log", "w") as out:
        for r in list(github.requests):
            out.write(f"{r.method} {r.path} {json.dumps(r.body)[:300]}\n")
    with open(logs / "model.log", "w") as out:
        for r in list(model.requests):
            users = [m for m in r.body.get("messages") or [] if m.get("role") == "user"]
            last = _text(users[-1])[-200:] if users else ""
            tools = [m for m in r.body.get("messages") or [] if m.get("role") == "tool"]
            result = _text(tools[-1])[-300:] if tools else ""
            out.write(f"{r.at:.1f} {len(r.body.get('messages') or [])} msgs; last user "
                      f"{last!r}; last tool result {result!r} -> {r.reply}\n")


def count(result: Result, github, lifecycles: list[Lifecycle]) -> None:
    """The three figures, from the database and the recording GitHub."""
    from effects.models import Effect
    from sessions.core.turns import TERMINALS
    from sessions.models import TimelineEvent, Turn
    from tickets.models import Ticket

    # Lost: outbox rows never done, and what a lifecycle asked for that never happened.
    for effect in Effect.objects.order_by("pk"):
        result.lost += 1
        result.details.append(f"effect {effect.pk} {effect.kind} {effect.key} left "
                              f"{effect.state} after {effect.attempts} attempts: "
                              f"{effect.last_error[:200]}")
    for lc in lifecycles:
        if lc.failure:
            result.lost += 1
            result.details.append(lc.failure)

    # Duplicates: each comment's visible text and each pull request's head is unique per
    # lifecycle, so any second POST of one is a message sent twice.
    comments = Counter()
    for r in github.matching("POST", rf"/repos/{REPO}/issues/\d+/comments"):
        text = str(r.body.get("body", "")) if isinstance(r.body, dict) else ""
        comments[(r.path, text.split("\n\n<!--")[0].strip())] += 1
    pulls = Counter(str(r.body.get("head")) for r in github.matching(
        "POST", rf"/repos/{REPO}/pulls") if isinstance(r.body, dict))
    for (path, text), times in comments.items():
        if times > 1:
            result.duplicates += times - 1
            result.details.append(f"comment {text!r} on {path} posted {times} times")
    for head, times in pulls.items():
        if times > 1:
            result.duplicates += times - 1
            result.details.append(f"pull request for {head} created {times} times")

    # Turns: exactly one terminal event each.
    terminal = Counter(TimelineEvent.objects.filter(type__in=list(TERMINALS))
                       .values_list("turn_id", flat=True))
    for turn in Turn.objects.select_related("session").order_by("pk"):
        if terminal[turn.pk] != 1:
            result.bad_turns += 1
            result.details.append(f"turn {turn.pk} (session {turn.session.name}, "
                                  f"{turn.state}) has {terminal[turn.pk]} terminal events")
    ended = Ticket.objects.exclude(ended_at=None).count()
    result.details.append(f"info: {ended} of {len(lifecycles)} tickets ended; "
                          f"{len(comments)} comments, {len(pulls)} pull requests on GitHub")


def run(*, lifecycles: int, data_dir: Path, env: dict[str, str], seed: int | None = None,
        parallel: int = 3, kill_interval: tuple[float, float] = (6.0, 14.0),
        lifecycle_timeout: float = 240.0, settle_timeout: float = 120.0,
        min_kills: int = 0, log=print) -> Result:
    """Run `lifecycles` ticket lifecycles, `parallel` at a time, under random SIGKILLs.

    With `min_kills`, lifecycles go on being started (up to three times as many) until the
    killer has struck that often while they ran: a fast run still meets every kind of
    fault, without kills so frequent that no lifecycle could finish between them.

    Django must be set up against the database `env` points the processes at."""
    from amux_site import embedded_redis
    from sessions.hosting import hostname
    from sessions.models import Session
    from tests.support.git_server import served_github
    from tests.support.workers import purge_queues

    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    log(f"chaos: seed {seed}, {lifecycles} lifecycles, {parallel} at a time")
    logs = data_dir / "chaos-logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = embedded_redis.free_port()
    started = time.monotonic()
    result = Result(lifecycles=lifecycles)
    purge_queues()
    # a dispatch clones the ticket's repository: GitHub answers a real one, served by git
    with served_github([REPO], token="ghp_chaos") as (github, _git), ModelServer() as model:
        model.responder = respond
        for n in range(lifecycles * (3 if min_kills else 1)):
            github.state.issues[(REPO, FIRST_ISSUE + n)] = {"title": f"Bug {FIRST_ISSUE + n}"}
        _world(github.url, model.base_url)
        cluster = Cluster({**env, "AMUX_URL": f"http://127.0.0.1:{port}"}, port, logs,
                          hostname(), runtime_slots=parallel)
        cluster.start()
        killer = Killer(cluster, rng, kill_interval)
        try:
            killer.start()
            running: list[Lifecycle] = []
            done: list[Lifecycle] = []
            todo = list(range(lifecycles))
            started_count = 0
            while todo or running:
                if (not todo and sum(killer.kills.values()) < min_kills
                        and started_count < lifecycles * 3):
                    todo.append(started_count)
                while todo and len(running) < parallel:
                    lc = Lifecycle(todo.pop(0), cluster.url, github, lifecycle_timeout)
                    lc.start()
                    started_count += 1
                    running.append(lc)
                # A session sleeps as soon as its queue is empty: hosts free their slots.
                Session.objects.filter(idle_timeout_s__gt=1).update(idle_timeout_s=1)
                time.sleep(0.5)
                for lc in [lc for lc in running if not lc.is_alive()]:
                    running.remove(lc)
                    done.append(lc)
                    outcome = f"FAILED: {lc.failure}" if lc.failure else "ended"
                    log(f"chaos: lifecycle {lc.n} {outcome} ({len(done)}/{started_count}, "
                        f"kills {dict(killer.kills)})")
            killer.halt.set()
            killer.join(30)
            cluster.revive()
            deadline = time.monotonic() + settle_timeout
            while time.monotonic() < deadline and not _settled():
                time.sleep(1)
            count(result, github, done)
        finally:
            _dump(logs, github, model)
            killer.halt.set()
            cluster.stop()
            purge_queues()
    result.kills = dict(killer.kills)
    result.lifecycles = len(done)
    result.seconds = time.monotonic() - started
    return result


# ------------------------------------------------------------------ make chaos
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifecycles", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)

    # A private data directory: its own SQLite database and embedded Redis, never the
    # operator's.
    data_dir = Path(tempfile.mkdtemp(prefix="amux-chaos-"))
    for name in ("DATABASE_URL", "REDIS_URL", "AMUX_EMBEDDED_REDIS"):
        os.environ.pop(name, None)
    os.environ.update(AMUX_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="amux_site.settings")
    import django

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per webhook is noise
    from django.core.management import call_command

    from amux_site import embedded_redis
    from tests.support.workers import worker_env

    call_command("migrate", verbosity=0)
    try:
        result = run(lifecycles=args.lifecycles, data_dir=data_dir, seed=args.seed,
                     parallel=args.parallel, env=worker_env(data_dir, **CHAOS_ENV))
    finally:
        embedded_redis.stop(data_dir)
    print(result.summary())
    print(f"chaos: logs in {data_dir / 'chaos-logs'}")
    return 0 if result.ok else 1


# Short leases so that killed work is found again within seconds, and sessions that sleep
# as soon as they are idle.
CHAOS_ENV = {"AMUX_OUTBOX_LEASE_SECONDS": "12", "AMUX_OUTBOX_TASK_TIME_LIMIT": "5",
             "AMUX_SESSION_LEASE_SECONDS": "6",
             "AMUX_SESSION_MIN_IDLE_SECONDS": "1", "PYTHONUNBUFFERED": "1"}


if __name__ == "__main__":
    sys.exit(main())
