"""Channel-layer sends for synchronous code, off the caller's path.

A web request or a Celery task that stores timeline events must not wait for Redis to fan
them out (posting a message would otherwise take the publish's round trips before the
session host is even nudged). Each process gets one daemon thread running an event loop
that sends, in submission order, through one channel-layer connection pool that lives as
long as the process. A send that fails or is lost at exit costs nothing durable: the
stored timeline is the truth and a consumer fills any gap from the database on the next
event or on reconnect.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from typing import Any

log = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": None, "loop": None, "queue": None}


def submit(alias: str, group: str, message: dict[str, Any]) -> None:
    """Queue one group_send on the process's publisher loop; returns at once."""
    loop, queue = _started()
    loop.call_soon_threadsafe(queue.put_nowait, (alias, group, message))


def flush(timeout: float = 2.0) -> bool:
    """Wait (bounded) until everything submitted so far was sent; True if it was."""
    with _lock:
        loop, queue = _state["loop"], _state["queue"]
        if loop is None or _state["pid"] != os.getpid():
            return True
    done = threading.Event()
    loop.call_soon_threadsafe(queue.put_nowait, done)
    return done.wait(timeout)


def _started() -> tuple[asyncio.AbstractEventLoop, asyncio.Queue]:
    with _lock:
        if _state["pid"] != os.getpid():  # first use, or a forked child (Celery prefork)
            loop = asyncio.new_event_loop()
            queue_box: list[asyncio.Queue] = []
            ready = threading.Event()
            thread = threading.Thread(target=_run, args=(loop, queue_box, ready),
                                      name="timeline-publisher", daemon=True)
            thread.start()
            ready.wait()
            _state.update(pid=os.getpid(), loop=loop, queue=queue_box[0])
        return _state["loop"], _state["queue"]


def _run(loop: asyncio.AbstractEventLoop, box: list, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    box.append(asyncio.Queue())
    ready.set()
    loop.run_until_complete(_drain(box[0]))


async def _drain(queue: asyncio.Queue) -> None:
    from channels.layers import get_channel_layer

    while True:
        item = await queue.get()
        if isinstance(item, threading.Event):
            item.set()
            continue
        alias, group, message = item
        try:
            layer = get_channel_layer(alias)
            if layer is not None:
                await layer.group_send(group, message)
        except Exception:
            log.warning("publishing to %s failed", group, exc_info=True)


atexit.register(flush)
