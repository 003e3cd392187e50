"""Loaded into a real Celery worker (`-I tests.support.pool_probe`) by tests of pooled
connections: a task that reports which server connection its process uses, and a parent
that uses the database itself before it forks more children (`--max-tasks-per-child 1`)."""

from __future__ import annotations

import json
import os
import threading
import time

import redis
from celery import signals
from django.conf import settings
from django.db import connection

from amux_site.celery import app

PARENT_KEY = "pool-probe:parent"
RESULTS_KEY = "pool-probe:results"


def _backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@app.task(name="tests.pool_probe")
def pool_probe(pause: float) -> None:
    backend = _backend()
    time.sleep(pause)  # the other child runs meanwhile: two connections at once
    assert _backend() == backend  # a task keeps the connection it borrowed
    redis.Redis.from_url(settings.REDIS_URL).rpush(RESULTS_KEY, json.dumps(
        {"pid": os.getpid(), "ppid": os.getppid(), "backend": backend}))


@signals.worker_ready.connect
def _parent_uses_the_database(**kwargs) -> None:
    """The hard case: the parent holds a pooled connection and the pool keeps two more idle
    when it forks the next children."""
    backends = [_backend()]  # kept checked out by this thread
    both = threading.Barrier(2)

    def borrow():
        backends.append(_backend())
        both.wait(10)  # two threads at once: two distinct pooled connections
        connection.close()  # back to the pool, which keeps it open

    threads = [threading.Thread(target=borrow) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    redis.Redis.from_url(settings.REDIS_URL).set(PARENT_KEY, json.dumps(
        {"pid": os.getpid(), "backends": backends}))
