"""The threads the model gateway does its database work on: a few long-lived threads that
each keep their database connection between requests.

plain_asgi's threads give their connection back to the pool after each request and borrow
one again for the next, as Django's request signals do; with the health check that comes
with a borrowed connection that costs about 3 ms per request on 2 cores, more than the
gateway's whole latency budget (bench/gateway.py). Autocommit makes each lookup see what
was committed before it, so a kept connection reads nothing stale; one that failed is
closed, and the lookup is tried once more on a fresh one. `close()` ends the threads, each
closing its connection (a test database can then be dropped).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connection, reset_queries

log = logging.getLogger(__name__)

THREADS = 2  # each lookup is about a millisecond: two keep up with hundreds a second


class Lookups:
    def __init__(self, threads: int = THREADS):
        self.threads = threads
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._running: list[threading.Thread] = []
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on one of the threads; what it raises is raised here."""
        self._start()
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()
        self._queue.put((fn, args, loop, done))
        return await done

    def close(self) -> None:
        with self._lock:
            running, self._running = self._running, []
            for _thread in running:
                self._queue.put(None)
        for thread in running:
            thread.join(10)

    def _start(self) -> None:
        """On first use, so that a server forking its workers forks no thread."""
        if self._running:
            return
        with self._lock:
            while len(self._running) < self.threads:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name="amux-model-gateway")
                thread.start()
                self._running.append(thread)

    def _work(self) -> None:
        try:
            while (item := self._queue.get()) is not None:
                fn, args, loop, done = item
                try:
                    outcome, failed = _call(fn, *args), False
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting request
                    outcome, failed = exc, True
                loop.call_soon_threadsafe(_settle, done, outcome, failed)
        finally:
            connection.close()


def _settle(done: asyncio.Future, outcome: Any, failed: bool) -> None:
    if done.done():
        return  # the request went away meanwhile
    if failed:
        done.set_exception(outcome)
    else:
        done.set_result(outcome)


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    reset_queries()  # under DEBUG the query log of a kept connection would only grow
    try:
        return fn(*args)
    except DatabaseError:
        log.warning("model gateway: a database lookup failed; retrying on a new connection")
        connection.close()
        return fn(*args)


lookups = Lookups()
