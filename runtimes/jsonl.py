"""JSON lines over a child's stdio: a tiny request/response correlator (Codex app-server's
JSON-RPC without the ``jsonrpc`` member, Pi's RPC with string ids)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from . import errors


class JsonLines:
    def __init__(self, proc: asyncio.subprocess.Process,
                 on_message: Callable[[dict[str, Any]], Awaitable[None] | None],
                 on_closed: Callable[[], None],
                 observer: Callable[[str, dict[str, Any]], None] | None = None,
                 id_key: str = "id", string_ids: bool = False):
        self.proc = proc
        self.on_message = on_message
        self.on_closed = on_closed
        self.observer = observer
        self.id_key = id_key
        self.string_ids = string_ids
        self._ids = itertools.count(1)
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._write_lock = asyncio.Lock()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        try:
            while True:
                chunk = await self.proc.stdout.read(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.rstrip(b"\r")
                    if not line.strip():
                        continue
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue  # not protocol (a stray log line)
                    if isinstance(msg, dict):
                        await self._handle(msg)
        finally:
            with contextlib.suppress(Exception):
                await self.proc.wait()
            self._closed()

    async def _handle(self, msg: dict[str, Any]) -> None:
        """One inbound message: a response settles its request, the rest go on."""
        if self.observer:
            self.observer("in", msg)
        if self._is_response(msg):
            fut = self._waiting.pop(msg.get(self.id_key), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
            return
        result = self.on_message(msg)
        if asyncio.iscoroutine(result):
            await result

    def _closed(self, why: str = "the runtime closed its output") -> None:
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(errors.RuntimeExited(why))
        self._waiting.clear()
        self.on_closed()

    def _is_response(self, msg: dict[str, Any]) -> bool:
        if self.string_ids:  # Pi: {"type": "response", "id": ...}
            return msg.get("type") == "response" and msg.get(self.id_key) in self._waiting
        return "method" not in msg and self.id_key in msg

    async def send(self, msg: dict[str, Any]) -> None:
        if self.observer:
            self.observer("out", msg)
        await self._write(msg)

    async def _write(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        async with self._write_lock:
            try:
                self.proc.stdin.write(data)
                await self.proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError, RuntimeError) as exc:
                raise errors.RuntimeExited(f"cannot write to the runtime: {exc}") from exc

    async def request(self, msg: dict[str, Any], timeout: float | None = 60.0
                      ) -> dict[str, Any]:
        rid: Any = next(self._ids)
        if self.string_ids:
            rid = str(rid)
        msg = {**msg, self.id_key: rid}
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        await self.send(msg)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self._waiting.pop(rid, None)
            raise errors.RuntimeTimeout(
                f"no answer to {msg.get('method') or msg.get('type')} in {timeout}s") from None
