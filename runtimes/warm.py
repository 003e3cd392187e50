"""Pre-started runtimes: what makes two launches the same, and a started adapter driven
from another event loop.

A runtime that cannot share one process between sessions (Pi) can still be started before
its session exists — under an identity, state directory and work directory of its own,
prepared in advance — and handed to the next new session whose launch is the same. The
launch key (``launch_key``) is everything that varies the process as it starts: the
runtime, the provider and model settings, the native arguments and permissions, the
environment and PATH, the MCP configuration, the isolation backend and what the sandbox
shows. A process whose key differs is never handed over. What a process cannot know when
it starts reaches it after the hand-over without leaving the session's own reach: the
provider credential is a file in its private state directory, read at each model request
(``RuntimeConfig.provider_key_file``); the prompt comes with each turn.

the `amux` command reads the same credential from that file (``pooled_form``). A launch
that carries a credential any other way (an MCP bearer, a token file of its own, a file
handed to the session's own group) cannot be pre-started (``not_poolable``).

Pure: no Django.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from .base import RuntimeAdapter, RuntimeConfig

KEY_FILE = "provider-key"  # in the state directory, the session's identity's alone

# Set per slot or per session, never part of what the process is: its directories and
# identity (the slot's, which the session takes), its credential, the prompt (each turn
# brings it), and what only amux's side uses (the watchdog, the wire observer).
PER_SLOT = frozenset({"workdir", "state_dir", "runtime_user", "provider_key_file",
                      "system_prompt", "inline_prompt_seen", "wire_observer", "watchdog",
                      "cancel_grace_seconds", "private_files"})
# The session credential as the `amux` command takes it (tickets/tools/amux_cli.py): given
# in the environment, which a pre-started process cannot have, or as a file, which it
# can — the key file, in its state directory (``pooled_form``).
TOKEN_ENV = "AMUX_ASSIGNMENT_TOKEN"
TOKEN_FILE_ENV = "AMUX_ASSIGNMENT_TOKEN_FILE"
KEY_FILE_MARK = f"<state>/{KEY_FILE}"  # the slot's key file, in a launch not yet on a slot


def pooled_form(cfg: RuntimeConfig) -> RuntimeConfig:
    """The launch as a pre-started process runs it: the session credential the `amux`
    command takes read from the key file rather than given in the environment."""
    env = dict(cfg.extra_env)
    if env.get(TOKEN_ENV) and env[TOKEN_ENV] == cfg.provider.api_key:
        del env[TOKEN_ENV]
        env[TOKEN_FILE_ENV] = KEY_FILE_MARK
    return dataclasses.replace(cfg, extra_env=env)


def not_poolable(runtime: type[RuntimeAdapter], cfg: RuntimeConfig) -> str | None:
    """Why this launch cannot take a pre-started process (None: it can)."""
    if not runtime.warm_start:
        return f"{runtime.name} cannot be started before its session"
    if cfg.attach is not None:
        return "an attached app-server"
    if cfg.private_files:
        return "files handed to the session's own group"
    if any(s.bearer_token or s.bearer_token_file for s in cfg.mcp_servers):
        return "an MCP server with a bearer token"
    if TOKEN_ENV in cfg.extra_env or (
            cfg.provider.api_key and cfg.provider.api_key in cfg.extra_env.values()):
        return "a credential in the environment"
    if cfg.extra_env.get(TOKEN_FILE_ENV, KEY_FILE_MARK) != KEY_FILE_MARK:
        return "a token file of its own"
    return None


def launch_key(runtime: str, cfg: RuntimeConfig) -> str:
    """A short digest of everything that varies the launch (see the module's docstring)."""
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
              if f.name not in PER_SLOT}
    provider = cfg.provider
    fields["provider"] = [provider.platform, provider.base_url, provider.slug]
    fields["mcp_servers"] = [[s.name, s.url] for s in cfg.mcp_servers]
    fields["runtime"] = runtime
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def slot_config(template: RuntimeConfig, workdir: Path, state_dir: Path,
                user: str) -> RuntimeConfig:
    """The configuration a pre-started process starts with: ``template``'s launch (in
    its ``pooled_form``) on the slot's directories and identity, with no credential and
    no prompt."""
    env = dict(template.extra_env)
    if TOKEN_FILE_ENV in env:
        env[TOKEN_FILE_ENV] = str(Path(state_dir) / KEY_FILE)
    return dataclasses.replace(
        template, workdir=workdir, state_dir=state_dir, runtime_user=user, extra_env=env,
        provider=dataclasses.replace(template.provider, api_key=""),
        provider_key_file=Path(state_dir) / KEY_FILE, system_prompt=None,
        inline_prompt_seen=None, wire_observer=None, private_files=())


def adopted_config(session_cfg: RuntimeConfig, started: RuntimeConfig) -> RuntimeConfig:
    """The session's configuration as the process it took runs it: the slot's directories,
    identity and key file, the session's everything else (equal by the launch key)."""
    return dataclasses.replace(
        session_cfg, workdir=started.workdir, state_dir=started.state_dir,
        runtime_user=started.runtime_user, provider_key_file=started.provider_key_file,
        extra_env=started.extra_env)


class OnLoop:
    """An adapter started on another thread's event loop (the warm pool's), used from the
    caller's own: each coroutine runs on the adapter's loop, whose streams, queue and
    relay it was started with; attributes are read and set through."""

    def __init__(self, adapter: RuntimeAdapter, loop: asyncio.AbstractEventLoop):
        object.__setattr__(self, "_adapter", adapter)
        object.__setattr__(self, "_loop", loop)

    @property
    def adapter(self) -> RuntimeAdapter:
        return self._adapter

    async def _call(self, coro: Any) -> Any:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._adapter, name)
        if inspect.isasyncgenfunction(getattr(type(self._adapter), name, None)):
            return lambda *a, **kw: self._stream(value(*a, **kw))
        if inspect.iscoroutinefunction(value):
            async def call(*a: Any, **kw: Any) -> Any:
                return await self._call(value(*a, **kw))
            return call
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._adapter, name, value)

    async def _stream(self, agen: Any) -> AsyncIterator[Any]:
        done = object()

        async def step() -> Any:
            try:
                return await agen.__anext__()
            except StopAsyncIteration:
                return done

        async def close() -> None:
            await agen.aclose()

        try:
            while (item := await self._call(step())) is not done:
                yield item
        finally:
            await self._call(close())
