"""Real Celery workers as child processes of a test, against the test's database and Redis."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def purge_queues() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete("runtime", "default", "unacked", "unacked_index", "unacked_mutex")
    # every host's own queue too: a task pinned to `runtime.box1` by an earlier run (or an
    # earlier test) names a session id that a fresh test database hands out again
    for key in client.scan_iter(match="runtime.*"):
        client.delete(key)
    for key in client.scan_iter(match="amux:session:*:wake"):
        client.delete(key)  # host tasks that were on their way went with the queues
    # The debounce flags say "a drain task is queued": with the queues gone, a flag left
    # set (e.g. by an earlier test's wake-up, sent up to 20 ms after its commit) would keep
    # this test's wake-ups from sending one for its 10 s.
    from django.core.cache import cache

    from effects.outbox import KICK_FLAG
    from intake.process import WAKE_FLAG

    cache.delete_many([WAKE_FLAG, KICK_FLAG])


def worker_env(data_dir: Path, **extra: str) -> dict[str, str]:
    db = connection.settings_dict
    if "sqlite" in db["ENGINE"]:
        url = f"sqlite:///{db['NAME']}"
    else:
        url = (f"postgres://{db['USER']}{':' + db['PASSWORD'] if db['PASSWORD'] else ''}"
               f"@{db['HOST']}:{db['PORT']}/{db['NAME']}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({"DATABASE_URL": url, "REDIS_URL": settings.REDIS_URL,
                "AMUX_DATA_DIR": str(data_dir), "AMUX_SECRET_KEY": settings.SECRET_KEY,
                "DJANGO_SETTINGS_MODULE": "amux_site.settings",
                # an idle host looks at its clock often, so it sleeps when its time is up
                "AMUX_SESSION_CONTROL_POLL_SECONDS": "0.2", **extra})
    return env


class Worker:
    def __init__(self, name: str, env: dict[str, str], queues: str = "runtime,default",
                 beat: bool = False, log: Path | None = None, sessions: int | None = None,
                 extra: tuple[str, ...] = ()):
        """``sessions``: a runtime worker as `amux run` starts it, one process with a
        thread per awake session (Celery's thread pool), that many at once."""
        pool = ["-P", "threads", "-c", str(sessions)] if sessions else ["-c", "1"]
        argv = [sys.executable, "-m", "celery", "-A", "amux_site", "worker", "-Q", queues,
                *pool, "-n", f"{name}@%h", "--without-gossip", "--without-mingle",
                "--without-heartbeat", "-l", "info", *extra]
        if beat:
            argv += ["-B", "-s", str(Path(env["AMUX_DATA_DIR"]) / f"beat-{name}")]
        self.log_path = log
        out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def stop(self, grace: float = 2.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds: a warm shutdown waits for the
        tasks in hand (a session host until its session sleeps), which no test that is
        not about shutting down should wait for; what a killed worker leaves is
        recovered from leases and the outbox, as after any crash."""
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""


def amux_workers(name: str, env: dict[str, str], *, sessions: int, logs: Path,
                 beat: bool = False) -> list[Worker]:
    """A runtime worker and a default worker, as `amux run` starts them. One pool for both
    queues would let awake sessions (each holds a thread until it sleeps) keep the outbox
    and beat's tasks waiting, which no installation does."""
    return [Worker(f"{name}-runtime", env, queues="runtime", sessions=sessions,
                   log=logs / f"{name}-runtime.log"),
            Worker(f"{name}-default", env, queues="default", beat=beat,
                   log=logs / f"{name}-default.log")]


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not reached")
