"""A coroutine run to its end from synchronous code, whatever the calling thread runs.

``asyncio.run`` refuses to start in a thread that already runs an event loop (a caller
inside one, or a library such as Playwright's sync API that keeps one in the main thread).
A fresh thread has none, so the coroutine always gets a loop of its own there.

Pure: no Django.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], name: str = "amux-run") -> T:
    """``asyncio.run(coro)`` on a fresh thread; its exception is raised here."""
    out: list[Any] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            out.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            failure.append(exc)

    thread = threading.Thread(target=target, name=name)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return out[0]
