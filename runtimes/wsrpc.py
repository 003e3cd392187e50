"""The JSON-RPC correlator of ``jsonl`` over a websocket instead of a child's stdio: one
JSON message per text frame (``codex app-server --listen ws://…``). Requests, responses
and inbound dispatch are ``JsonLines``'s; only the pipe differs."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from . import errors
from .jsonl import JsonLines


async def connect(url: str, token: str | None, timeout: float = 10.0) -> Any:
    """Open the websocket; the capability token goes as a bearer (what ``--ws-auth
    capability-token`` checks). Unreachable or refused: ``RuntimeStartFailed``."""
    import websockets

    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:
        return await asyncio.wait_for(websockets.connect(
            url, additional_headers=headers, max_size=None, open_timeout=timeout,
            ping_interval=20, ping_timeout=20), timeout)
    # ValueError: a host name IDNA cannot encode, a token a header cannot carry (what a
    # caller registering an app-server may send: refused like an unreachable one)
    except (OSError, TimeoutError, ValueError,
            websockets.exceptions.WebSocketException) as exc:
        raise errors.RuntimeStartFailed(
            f"the app-server at {url} does not answer: {exc or 'timeout'}",
            code="app_server_unreachable") from exc


class WebSocketLines(JsonLines):
    def __init__(self, ws: Any,
                 on_message: Callable[[dict[str, Any]], Awaitable[None] | None],
                 on_closed: Callable[[], None],
                 observer: Callable[[str, dict[str, Any]], None] | None = None):
        self.ws = ws
        self.proc = None  # type: ignore[assignment]  # no child: the app-server is not ours
        self.on_message = on_message
        self.on_closed = on_closed
        self.observer = observer
        self.id_key = "id"
        self.string_ids = False
        self._ids = itertools.count(1)
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._write_lock = asyncio.Lock()
        self.open = True
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                try:
                    msg = json.loads(frame)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    await self._handle(msg)
        except Exception:  # noqa: BLE001 - a dropped connection is the end either way
            pass
        finally:
            self.open = False
            self._closed("the app-server closed the connection")

    async def _write(self, msg: dict[str, Any]) -> None:
        if not self.open:
            raise errors.RuntimeExited("the app-server connection is closed")
        async with self._write_lock:
            try:
                await self.ws.send(json.dumps(msg, separators=(",", ":")))
            except Exception as exc:  # noqa: BLE001 - websockets' closed/IO errors
                raise errors.RuntimeExited(
                    f"cannot write to the app-server: {exc}") from exc

    async def aclose(self) -> None:
        """Close only this connection (the app-server and its threads stay)."""
        self.open = False
        with contextlib.suppress(Exception):  # already gone
            await asyncio.wait_for(self.ws.close(), 5)
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
