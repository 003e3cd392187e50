"""Codex in an app-server amux did not start for this session: ``codex app-server --listen
ws://…`` already running (started by the operator, or by amux's broker on the operator's
request, sessions/app_servers.py), reached over its websocket.

The protocol handling is ``CodexAdapter``'s; only the pipe differs (``wsrpc``). The
app-server owns the process, the provider configuration and the thread: this adapter
never spawns anything, never starts a thread (``start`` only resumes the attached one;
a thread the app-server no longer knows fails closed, never a new one) and ``close()``
closes only its own connection. When the connection drops, the turn in flight fails with
a clear error and the next start fails while the app-server stays unreachable — there is
no fallback to a local runtime.

Observed with the pinned 0.171.0: a missing or wrong capability token is refused with
HTTP 401 before the websocket opens; several clients may be connected at once, each does
its own ``initialize``; ``thread/resume`` from a second connection attaches it to the
thread (both then see its turn notifications); ``thread/list`` lists the persisted
threads with their ``cwd``, ``thread/loaded/list`` the ids in memory; when the process
dies the socket closes without a close frame and new connections are refused.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from . import errors, wsrpc
from .base import Capabilities, Probe, ProviderSpec, RuntimeConfig
from .codex import CLIENT_INFO, CodexAdapter

# The provider is the app-server's own (its config.toml): amux hands it nothing.
ATTACHED_PROVIDER = ProviderSpec(platform="attached", base_url="", slug="")


class CodexAttachedAdapter(CodexAdapter):
    name = "codex-attached"
    takes_mcp = False  # the app-server's configuration is its owner's
    accepts_extra_args = False

    def __init__(self, config: RuntimeConfig):
        super().__init__(config)
        attach = config.attach or {}
        if not attach.get("url"):
            raise errors.RuntimeStartFailed("the session is not attached to an app-server",
                                            code="not_attached")
        self.url: str = attach["url"]
        self.token: str | None = attach.get("token")
        self.thread: str | None = attach.get("thread")

    @classmethod
    def check_provider(cls, provider: ProviderSpec) -> None:
        pass  # inherited from the app-server

    @classmethod
    def probe(cls, runtimes_dir: Path | None = None) -> Probe:
        found = CodexAdapter.probe(runtimes_dir)
        return Probe(cls.name, found.installed, found.version, found.path, found.error)

    @classmethod
    def static_capabilities(cls) -> Capabilities:
        return Capabilities(resume=True, interrupt=True, images=True, permissions=True,
                            questions=True, set_model=False, native_cumulative_usage=True)

    @classmethod
    def takes_launch_entries(cls) -> bool:
        return False  # the thread's instructions are its owner's

    @property
    def alive(self) -> bool:
        rpc = self._rpc
        return (not self._closed and isinstance(rpc, wsrpc.WebSocketLines) and rpc.open)

    def _probe_wanted(self) -> bool:
        return False  # no binary of ours runs: nothing to probe

    async def _thread_config(self) -> dict[str, Any]:
        return {}

    async def _launch(self) -> None:
        ws = await wsrpc.connect(self.url, self.token)
        self._rpc = wsrpc.WebSocketLines(ws, self._on_message, self._on_closed,
                                         observer=self._observe_wire)
        try:
            self.init_result = await self._call("initialize", {
                "clientInfo": CLIENT_INFO, "capabilities": {"experimentalApi": True}},
                timeout=30)
            await self._rpc.send({"method": "initialized"})
        except errors.RuntimeAdapterError as exc:
            await self._rpc.aclose()
            raise errors.RuntimeStartFailed(f"the app-server refused the handshake: {exc}",
                                            code="app_server_unreachable") from exc

    async def start(self, resume: str | None = None) -> str:
        thread = resume or self.thread
        if not thread:
            raise errors.RuntimeStartFailed("an attached session has no thread to resume",
                                            code="not_attached")
        await self._launch()
        try:
            result = await self._call("thread/resume", {"threadId": thread,
                                                        "excludeTurns": True}, timeout=60)
        except errors.ProtocolError as exc:
            await self.close()
            # never NativeSessionNotFound: the host would start a new conversation
            raise errors.RuntimeStartFailed(
                f"the app-server no longer has the attached thread: {exc}",
                code="attached_thread_gone") from exc
        except BaseException:
            await self.close()
            raise
        if result.get("thread", {}).get("id") != thread:
            await self.close()
            raise errors.RuntimeStartFailed("the app-server resumed another thread",
                                            code="attached_thread_gone")
        self._thread_id = thread
        self.native_session_id = thread
        await self._probe_goals()
        return thread

    async def clear(self) -> str:
        raise errors.RuntimeAdapterError("an attached thread is its owner's: not cleared",
                                         code="clear_unsupported")

    hot_model_switch = False

    async def set_model(self, model: str, effort: str | None = None) -> None:
        raise errors.ConfigRejected("an attached thread keeps its owner's model")

    def _exited(self):
        exited = super()._exited()
        exited.stderr_tail = "the attached app-server closed the connection"
        return exited

    async def close(self) -> None:
        """Close this connection only: the app-server, its process and its thread stay."""
        if self._closed:
            return
        self._closed = True
        self._release_pending()
        for task in self._tasks:
            task.cancel()
        if isinstance(self._rpc, wsrpc.WebSocketLines):
            await self._rpc.aclose()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task


def thread_cwd(thread: dict[str, Any]) -> str:
    """A thread's work directory: ``cwd``, or its first environment's (0.171.0 has both
    shapes depending on the call)."""
    if isinstance(thread.get("cwd"), str):
        return thread["cwd"]
    envs = thread.get("environments") or []
    return str((envs[0] or {}).get("cwd") or "") if envs and isinstance(envs[0], dict) else ""


async def describe(url: str, token: str | None, timeout: float = 5.0) -> dict[str, Any]:
    """Connect, handshake and list the app-server's threads: ``{"threads": [{"id", "cwd",
    "model", "updated_at", "loaded"}]}``. Unreachable: ``RuntimeStartFailed``."""
    ws = await wsrpc.connect(url, token, timeout)
    closed: list[bool] = []
    rpc = wsrpc.WebSocketLines(ws, lambda _msg: None, lambda: closed.append(True))

    async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        msg = await rpc.request({"method": method, "params": params}, timeout=timeout)
        if "error" in msg:
            raise errors.ProtocolError(f"{method}: {(msg['error'] or {}).get('message')}")
        return msg.get("result") or {}

    try:
        await call("initialize", {"clientInfo": {**CLIENT_INFO, "name": "amux-broker"},
                                  "capabilities": {"experimentalApi": True}})
        await rpc.send({"method": "initialized"})
        listed = await call("thread/list", {"limit": 50})
        loaded: set[str] = set()
        with contextlib.suppress(errors.RuntimeAdapterError):
            loaded = set((await call("thread/loaded/list", {})).get("data") or [])
        threads = []
        seen = set()
        for row in listed.get("data") or []:
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                continue
            seen.add(row["id"])
            threads.append({"id": row["id"], "cwd": thread_cwd(row),
                            "model": row.get("model") or "",
                            "updated_at": row.get("updatedAt"),
                            "loaded": row["id"] in loaded})
        for tid in sorted(loaded - seen):  # started, nothing persisted yet
            with contextlib.suppress(errors.RuntimeAdapterError):
                read = (await call("thread/read", {"threadId": tid})).get("thread") or {}
                threads.append({"id": tid, "cwd": thread_cwd(read),
                                "model": read.get("model") or "",
                                "updated_at": read.get("updatedAt"), "loaded": True})
        return {"threads": threads}
    finally:
        await rpc.aclose()
