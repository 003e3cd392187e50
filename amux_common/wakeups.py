"""One debounced wake-up for the Celery tasks amux sends after a commit: the outbox's
drainer, intake's drainer, a source's poll.

A Redis flag stands for "a task is queued and has not started": while it is set, further
wake-ups send nothing, and the task clears it as it starts (`started`), so it sees all
that was committed before. Most wake-ups cost one `SET NX` instead of a broker publish.
Losing one only delays: each has a periodic sweep behind it, and the flag expires. The task
is sent by name, so the module that wakes it never imports the task's module (which sits
above it)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Wakeup:
    flag: str  # a cache key; "{name}" in it takes the task's argument `name` (one per source)
    seconds: float  # the flag's life: how long a lost task can hold back the next one
    task: str  # the Celery task's name

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

    def started(self, **kwargs) -> None:
        """The task starts: later wake-ups must send a new one."""
        from django.core.cache import cache

        try:
            cache.delete(self.key(**kwargs))
        except Exception:  # the flag expires by itself
            log.warning("wake-up flag %s not cleared", self.key(**kwargs), exc_info=True)
