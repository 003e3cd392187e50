"""A call sent from a thread of its own, coalesced: `Coalesced(fn)()` only raises a flag,
and the thread calls `fn` once for every time it finds the flag raised, however many
callers raised it meanwhile. For wake-ups that must not hold up the caller (a request's
answer, the session host's database thread) and that may be lost with the process (a
periodic sweep does the same work). A forked child starts a thread of its own."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Coalesced:
    def __init__(self, fn: Callable[[], None], name: str, gather: float = 0.0):
        self.fn, self.name, self.gather = fn, name, gather
        self.wanted = threading.Event()
        self.lock = threading.Lock()
        self.pid: int | None = None

    def __call__(self) -> None:
        if self.pid != os.getpid():
            with self.lock:
                if self.pid != os.getpid():
                    self.wanted = threading.Event()
                    threading.Thread(target=self._run, args=(self.wanted,), name=self.name,
                                     daemon=True).start()
                    self.pid = os.getpid()
        self.wanted.set()

    def _run(self, wanted: threading.Event) -> None:
        while True:
            wanted.wait()
            if self.gather:
                time.sleep(self.gather)
            wanted.clear()
            try:
                self.fn()
            except Exception:  # the thread must go on; the next call tries again
                log.warning("%s failed", self.name, exc_info=True)
