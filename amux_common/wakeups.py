"""One debounced wake-up for the Celery tasks amux sends after a commit: the outbox's
drainer, intake's drainer, a source's poll. `soon` sends it from a thread of its own, for a
caller that must wait for neither Redis nor the broker (a webhook's answer, a session
host's database thread).

A Redis flag stands for "a task is queued and has not started": while it is set, further
wake-ups send nothing, and the task clears it as it starts (`started`), so it sees all
that was committed before. Most wake-ups cost one `SET NX` instead of a broker publish.
Losing one only delays: each has a periodic sweep behind it, and the flag expires. The task
is sent by name, so the module that wakes it never imports the task's module (which sits
above it)."""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass

from amux_common.coalesce import Coalesced

log = logging.getLogger(__name__)

_soon: dict[str, Coalesced] = {}  # one sending thread per wake-up and process
_soon_lock = threading.Lock()


@dataclass(frozen=True)
class Wakeup:
    flag: str  # a cache key; "{name}" in it takes the task's argument `name` (one per source)
    seconds: float  # the flag's life: how long a lost task can hold back the next one
    task: str  # the Celery task's name
    gather: float = 0.0  # `soon` waits this long for more callers before it sends

    def key(self, **kwargs) -> str:
        return self.flag.format(**kwargs)

    def send(self, **kwargs) -> None:
        from celery import current_app
        from django.core.cache import cache

        flag = self.key(**kwargs)
        try:
            if not cache.add(flag, 1, self.seconds):
                return
        except Exception:  # Redis down: send the task anyway
            log.warning("wake-up flag %s not set", flag, exc_info=True)
        try:
            current_app.send_task(self.task, kwargs=kwargs, retry=False)
        except Exception:  # broker down: the periodic sweep does the work
            log.warning("%s not sent; its periodic sweep will run", self.task, exc_info=True)
            with contextlib.suppress(Exception):
                cache.delete(flag)

    def soon(self) -> None:
        """`send` from a thread of its own (amux_common.coalesce): the caller returns at
        once, and the calls made before that thread gets to it send once. Only for a
        wake-up whose flag takes no argument; lost with the process, as any wake-up may be
        (its sweep does the work)."""
        sender = _soon.get(self.flag)
        if sender is None:
            with _soon_lock:
                sender = _soon.get(self.flag)
                if sender is None:
                    sender = _soon[self.flag] = Coalesced(
                        self.send, f"wake:{self.task}", gather=self.gather)
        sender()

    def started(self, **kwargs) -> None:
        """The task starts: later wake-ups must send a new one."""
        from django.core.cache import cache

        try:
            cache.delete(self.key(**kwargs))
        except Exception:  # the flag expires by itself
            log.warning("wake-up flag %s not cleared", self.key(**kwargs), exc_info=True)
