"""Liveness of the Celery workers and beat, as keys with a TTL in Redis.

Each worker writes `amux:heartbeat:worker:<nodename>` every INTERVAL seconds from its own
event loop (a worker bootstep on the worker's timer, so a hung worker goes silent), and beat
writes `amux:heartbeat:beat` from its scheduler's tick. A key expires TTL seconds after the
last write, and a worker deletes its own key when it shuts down. `/healthz`, `amux status`
and `amux doctor` read them through `workers()`, `queue_check()` and `beat_check()`.
"""

from __future__ import annotations

import json
import logging
import os
import time

import redis
from celery import bootsteps
from celery.beat import PersistentScheduler
from django.conf import settings

from amux_common import worker_registry
from amux_common.worker_registry import PREFIX, TTL, WORKER_PREFIX

log = logging.getLogger(__name__)

INTERVAL = 5.0
BEAT_KEY = PREFIX + "beat"
# The queues `amux run` starts a worker for; a missing one makes the installation degraded.
EXPECTED_QUEUES = ("default", "runtime")


def _client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def _write(key: str, info: dict, client: redis.Redis | None = None) -> None:
    (client or _client()).set(key, json.dumps({**info, "at": time.time()}), ex=TTL)


def beat_alive(client: redis.Redis | None = None) -> None:
    _write(BEAT_KEY, {"pid": os.getpid()}, client)


def worker_alive(nodename: str, queues: list[str], client: redis.Redis | None = None,
                 slots: int = 0) -> None:
    """``slots``: how many tasks the worker runs at once (a runtime worker: sessions)."""
    _write(WORKER_PREFIX + nodename,
           {"hostname": nodename, "queues": sorted(queues), "pid": os.getpid(),
            "slots": slots}, client)


def worker_gone(nodename: str, client: redis.Redis | None = None) -> None:
    (client or _client()).delete(WORKER_PREFIX + nodename)


def workers(client: redis.Redis | None = None) -> list[dict]:
    """Every worker that has written a heartbeat within TTL seconds."""
    return worker_registry.workers(client or _client())


def queue_check(queue: str, client: redis.Redis | None = None) -> dict:
    try:
        names = [w["hostname"] for w in workers(client) if queue in w.get("queues", ())]
    except redis.RedisError as exc:
        return {"ok": False, "error": type(exc).__name__}
    if not names:
        return {"ok": False, "error": f"no worker heartbeat for queue {queue} in {TTL} s"}
    return {"ok": True, "workers": names}


def beat_check(client: redis.Redis | None = None) -> dict:
    try:
        raw = (client or _client()).get(BEAT_KEY)
    except redis.RedisError as exc:
        return {"ok": False, "error": type(exc).__name__}
    if raw is None:
        return {"ok": False, "error": f"beat silent for over {TTL} s"}
    return {"ok": True, "age_s": round(time.time() - json.loads(raw)["at"], 1)}


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Worker bootstep: a repeating entry on the worker's own timer."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.tref = None
        self.client = None

    def _beat(self, worker) -> None:
        try:
            queues = list(worker.app.amqp.queues.consume_from)
            worker_alive(worker.hostname, queues, self.client,
                         slots=int(getattr(worker, "concurrency", 0) or 0))
        except Exception as exc:  # Redis briefly away: the key simply ages out
            log.warning("heartbeat not written: %s", exc)

    def start(self, worker):
        self.client = _client()
        self._beat(worker)
        self.tref = worker.timer.call_repeatedly(INTERVAL, self._beat, (worker,), priority=10)

    def stop(self, worker):
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
        try:
            worker_gone(worker.hostname, self.client)
        except Exception as exc:
            log.debug("heartbeat not removed: %s", exc)

    def shutdown(self, worker):
        self.stop(worker)


class HeartbeatScheduler(PersistentScheduler):
    """Beat's scheduler, leaving a heartbeat each time its loop ticks."""

    _last_heartbeat = 0.0

    def tick(self, *args, **kwargs):
        now = time.monotonic()
        if now - self._last_heartbeat >= INTERVAL:
            try:
                beat_alive()
                self._last_heartbeat = now
            except Exception as exc:
                log.warning("beat heartbeat not written: %s", exc)
        interval = super().tick(*args, **kwargs)
        # Wake at least every INTERVAL so the heartbeat never ages out between schedules.
        return min(interval, INTERVAL)
