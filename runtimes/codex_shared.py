"""Codex sessions as threads of one shared ``codex app-server`` (private-home only).

A Codex app-server hosts many threads, so sessions whose process-level launch settings are
equal (the binary, its command-line arguments) can be threads of one process instead of one
process each. Only where every session already runs as amux's own user
(``AMUX_ISOLATION=private-home``): under linux-dac and bwrap each session has an identity
of its own, and a process shared by two sessions would let one see the other's files.

What is one session's never goes into the shared process: its environment holds no
provider key and no session token. Everything a session brings is a per-thread setting of
``thread/start`` / ``thread/resume`` (observed with the pinned 0.171.0 against the scripted
model server): ``cwd``, ``model``, ``modelProvider``, ``approvalPolicy``, ``sandbox``,
``developerInstructions``, and ``config`` overrides, which Codex validates and applies per
thread — the provider table ``model_providers.amux`` with the session's own gateway
credential as ``experimental_bearer_token`` (a provider defined with ``env_key`` at process
level would win over a per-thread bearer, so the shared config defines none), each MCP
server with its bearer as an ``Authorization`` header (``http_headers``), and
``shell_environment_policy.set`` for what the agent's commands see (the session's private
HOME and TMPDIR, its PATH and variables, and its own ``AMUX_RUNTIME_TAG``, so a successor
host ends that session's leftover commands without touching the shared process). None of
it is written under the shared ``CODEX_HOME``.

Each session's adapter has its own websocket connection (``--listen ws://127.0.0.1:<port>``
with a capability token, as attached app-servers do): the app-server sends a thread's
notifications and requests to the connections subscribed to it, so sessions hosted on
different threads of the runtime worker never share a pipe. When the process dies, every
connection closes: each session's turn ends cancelled and is queued again, as for a lost
host, and its next start resumes its thread in a new app-server (``AppServerLost``).

The registry is per runtime worker process; its one thread starts and stops the shared
processes (the parent-death signal is tied to the thread that forked, so it is a thread
that lives as long as the process). A process with no session left is stopped.

Pure: no Django.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amux_common.processes import die_with_parent

from . import errors, launch_context, wsrpc
from .base import SYSTEM_PATH, minimal_env, tagged_pids
from .codex import CLIENT_INFO, CodexAdapter, codex_binary, render_settings
from .events import TurnFailed
from .isolation import PRIVATE_HOME, Launch

READY_SECONDS = 30.0


@dataclass(frozen=True)
class ServerSpec:
    """What the shared process is launched with: sessions that differ in any of it never
    share one."""

    binary: Path
    extra_args: tuple[str, ...]
    root: Path  # where shared app-servers keep their state (one directory per spec)

    @property
    def key(self) -> str:
        raw = json.dumps([str(self.binary), list(self.extra_args)])
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


@dataclass
class SharedServer:
    spec: ServerSpec
    proc: subprocess.Popen
    url: str
    token: str
    tag: str
    state: Path
    users: set[str] = field(default_factory=set)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Registry:
    """The shared app-servers of this process, by launch spec: each carries at most
    ``max_threads`` sessions; a full one makes room for a second."""

    def __init__(self) -> None:
        # one thread for every start and stop: they are serialised, and each child's
        # parent-death signal is armed by a thread that outlives it
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="amux-codex-shared")
        self.servers: dict[str, list[SharedServer]] = {}
        self.started = 0  # processes started (tests and the bench read it)

    async def acquire(self, spec: ServerSpec, user: str, max_threads: int) -> SharedServer:
        return await asyncio.wrap_future(
            self._thread.submit(self._acquire, spec, user, max_threads))

    async def release(self, server: SharedServer, user: str) -> None:
        await asyncio.wrap_future(self._thread.submit(self._release, server, user))

    def _acquire(self, spec: ServerSpec, user: str, max_threads: int) -> SharedServer:
        live = [s for s in self.servers.get(spec.key, []) if s.alive]
        for gone in [s for s in self.servers.get(spec.key, []) if not s.alive]:
            _stop(gone)  # its stragglers (commands it started) go with it
        self.servers[spec.key] = live
        for server in live:
            if len(server.users) < max(1, max_threads):
                server.users.add(user)
                return server
        server = _start(spec)
        self.started += 1
        server.users.add(user)
        live.append(server)
        return server

    def _release(self, server: SharedServer, user: str) -> None:
        server.users.discard(user)
        if not server.users:
            _stop(server)
            with contextlib.suppress(ValueError):
                self.servers.get(server.spec.key, []).remove(server)

    def live(self) -> list[SharedServer]:
        return [s for group in self.servers.values() for s in group if s.alive]


REGISTRY = Registry()


def render_shared_config() -> str:
    """The shared process's config.toml: amux's fixed settings and no provider (each
    thread brings its own) — a provider's key never reaches the process."""
    return ("# generated by amux for a shared app-server; do not edit\n"
            + render_settings("on-request", "workspace-write"))


def free_port() -> int:
    """A loopback port free now, for an app-server to listen on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ready(port: int, proc: subprocess.Popen, timeout: float) -> bool:
    """Whether the app-server `proc` started answers its readiness probe on `port` within
    `timeout` seconds (False at once when it exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError), urllib.request.urlopen(  # noqa: S310 - loopback
                f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
            if answer.status == 200:
                return True
        time.sleep(0.02)
    return False


def _start(spec: ServerSpec) -> SharedServer:
    # one CODEX_HOME for every process of a spec (Codex keeps its threads there; its
    # state is made for several processes at once, like a person's CLIs): a thread
    # started in one resumes in any later one, whichever has room
    home = spec.root / spec.key / "home"
    codex_home = home / ".codex"
    tag = uuid.uuid4().hex
    state = spec.root / spec.key / "processes" / tag[:12]  # its token, tmp and log
    codex_home.mkdir(parents=True, exist_ok=True)
    (state / "tmp").mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(render_shared_config())
    token = secrets.token_urlsafe(32)
    token_file = state / "ws-token"
    token_file.touch(mode=0o600)
    token_file.write_text(token)
    env = {"HOME": str(home), "CODEX_HOME": str(codex_home), "PATH": SYSTEM_PATH,
           "TMPDIR": str(state / "tmp"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "TERM": "dumb", "NO_COLOR": "1", "AMUX_RUNTIME_TAG": tag}
    last = ""
    for _attempt in range(3):  # a free port may be taken between the probe and the bind
        port = free_port()
        with open(state / "app-server.log", "ab") as log:
            proc = subprocess.Popen(  # noqa: S603 - our pinned binary, argv only
                [str(spec.binary), "app-server", *spec.extra_args, "--listen",
                 f"ws://127.0.0.1:{port}", "--ws-auth", "capability-token",
                 "--ws-token-file", str(token_file)],
                cwd=str(state), env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, close_fds=True,
                preexec_fn=die_with_parent(signal.SIGKILL))
        if ready(port, proc, READY_SECONDS):
            return SharedServer(spec, proc, f"ws://127.0.0.1:{port}", token, tag, state)
        last = f"exit {proc.poll()}"
        _stop(SharedServer(spec, proc, "", token, tag, state), keep_log=True)
    raise errors.RuntimeStartFailed(f"the shared Codex app-server did not start ({last}); "
                                    f"see {state / 'app-server.log'}")


def _stop(server: SharedServer, keep_log: bool = False) -> None:
    proc = server.proc
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(3)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    for pid in tagged_pids(server.tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if not keep_log:
        shutil.rmtree(server.state, ignore_errors=True)


class CodexSharedAdapter(CodexAdapter):
    """A Codex session as one thread of a shared app-server (``RuntimeConfig.shared_app_server``:
    at most that many sessions per process). The protocol is ``CodexAdapter``'s; the pipe
    is a websocket of its own, the session's settings go with its thread."""

    def __init__(self, config: Any):
        if config.isolation != PRIVATE_HOME:
            # one process for several identities would let one session see another's files
            raise errors.RuntimeStartFailed(
                f"a shared app-server is only for private-home, not {config.isolation}",
                code="isolation_refused")
        super().__init__(config)
        self.server: SharedServer | None = None
        self.lost = False  # the shared process died under this session
        # a turn given up on without its native end (the cancel grace ran out): this
        # connection is not trusted with another turn of the thread
        self._abandoned = False
        self._native_ended = False  # the running turn's turn/completed has come

    @property
    def spec(self) -> ServerSpec:
        cfg = self.config
        assert cfg.runtimes_dir is not None and cfg.shared_app_server_root is not None
        return ServerSpec(codex_binary(cfg.runtimes_dir), tuple(cfg.extra_args),
                          cfg.shared_app_server_root)

    @property
    def alive(self) -> bool:
        rpc = self._rpc
        return (not self._closed and not self._abandoned
                and isinstance(rpc, wsrpc.WebSocketLines) and rpc.open)

    def _session_env(self) -> dict[str, str]:
        """What the session's commands see: what its own process would have had (its
        private HOME and TMPDIR, PATH, variables, launch context, its tag), never a key."""
        cfg = self.config
        env = minimal_env(cfg, self.tag)
        if self.takes_launch_entries():
            env[launch_context.CONTEXT_ENV] = launch_context.context(cfg.role,
                                                                     self.launch_channel)
        return env

    async def _launch(self) -> None:
        cfg = self.config
        binary = codex_binary(cfg.runtimes_dir)  # type: ignore[arg-type]
        if not binary.exists():
            raise errors.RuntimeNotInstalled(f"{binary} not found (run `make runtimes`)")
        # the same checks a launch of its own makes (a work directory outside amux's roots
        # is refused before anything runs)
        Launch.prepare(cfg.isolation, cfg.runtime_user, cfg.state_dir, cfg.workdir,
                       cfg.runtimes_dir, cfg.workdir_roots)
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        env = self._session_env()
        for _attempt in range(2):  # a server that died just now: the next one
            server = await REGISTRY.acquire(self.spec, self.tag, cfg.shared_app_server)
            try:
                ws = await wsrpc.connect(server.url, server.token)
            except errors.RuntimeStartFailed:
                await REGISTRY.release(server, self.tag)
                if server.alive:
                    raise
                continue
            self.server = server
            break
        else:
            raise errors.RuntimeStartFailed("the shared Codex app-server did not answer")
        self._rpc = wsrpc.WebSocketLines(ws, self._on_message, self._on_closed,
                                         observer=self._observe_wire)
        if self._probe_wanted():
            self._features_probe = asyncio.create_task(self._probe_features(binary, env))
            self._tasks.append(self._features_probe)
        try:
            self.init_result = await self._call("initialize", {
                "clientInfo": CLIENT_INFO, "capabilities": {"experimentalApi": True}},
                timeout=60)
            await self._rpc.send({"method": "initialized"})
        except BaseException:
            await self._cancel_probe()
            raise

    async def _thread_config(self) -> dict[str, Any]:
        """The session's own settings for its thread (see the module docstring)."""
        cfg = self.config
        config = dict(await super()._thread_config())
        config["model_providers"] = {"amux": {
            **provider_table(cfg.provider.base_url),
            "experimental_bearer_token": cfg.provider.api_key or "amux-no-key"}}
        servers: dict[str, Any] = {}
        for server, token in zip(cfg.mcp_servers, self.mcp_tokens(), strict=True):
            entry: dict[str, Any] = {"url": server.url}
            if token:
                entry["http_headers"] = {"Authorization": f"Bearer {token}"}
            servers[server.name] = entry
        if servers:
            config["mcp_servers"] = servers
        config["shell_environment_policy"] = {"set": self._session_env()}
        return config

    async def run_turn(self, turn_input: Any) -> Any:
        self._native_ended = False
        async for event in super().run_turn(turn_input):
            if isinstance(event, TurnFailed) and event.code == errors.RuntimeExited.code \
                    and await self._server_died():
                self.lost = True
                raise errors.AppServerLost("the shared Codex app-server stopped during this turn")
            if event.terminal and not self._native_ended:
                # its process is not ours to kill (as a session's own would be): the
                # session lets go of the thread, and its next turn resumes it afresh
                self._abandoned = True
            yield event

    async def _on_message(self, msg: dict[str, Any]) -> None:
        if msg.get("method") == "turn/completed" and self._turn_id and \
                ((msg.get("params") or {}).get("turn") or {}).get("id") == self._turn_id:
            self._native_ended = True
        await super()._on_message(msg)

    async def _server_died(self, within: float = 3.0) -> bool:
        """The connection closed because the process ended (it is reaped a moment after
        its socket closes)."""
        server = self.server
        deadline = asyncio.get_running_loop().time() + within
        while server is not None and server.alive:
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return server is not None

    async def _on_server_request(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        thread = params.get("threadId") or params.get("conversationId")
        if thread and thread != self._thread_id:
            return  # another session's: never answered here
        await super()._on_server_request(rid, method, params)

    def _exited(self) -> Any:
        exited = super()._exited()
        exited.stderr_tail = "the shared Codex app-server closed the connection"
        return exited

    async def close(self) -> None:
        """This session's connection and its thread in the process end; the process stays
        for the others (the last one out stops it)."""
        if self._closed:
            return
        self._release_pending()
        rpc = self._rpc
        if isinstance(rpc, wsrpc.WebSocketLines) and rpc.open and self._thread_id:
            # the thread is unloaded with its last subscriber: a later start resumes it
            # with the settings of that start
            with contextlib.suppress(errors.RuntimeAdapterError, TimeoutError):
                await self._call("thread/unsubscribe", {"threadId": self._thread_id},
                                 timeout=5)
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if isinstance(rpc, wsrpc.WebSocketLines):
            await rpc.aclose()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        # what the session's commands left running (tagged with its own tag)
        for pid in tagged_pids(self.tag):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.server is not None:
            server, self.server = self.server, None
            await REGISTRY.release(server, self.tag)


CodexAdapter.shared_variant = CodexSharedAdapter


def provider_table(base_url: str) -> dict[str, Any]:
    """``[model_providers.amux]`` without its key (``codex.render_config``'s table)."""
    return {"name": "amux", "base_url": base_url, "wire_api": "responses",
            "request_max_retries": 6, "stream_max_retries": 6}

