"""Helpers for tests that drive real runtimes against the scripted model server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtimes import RuntimeAdapter, RuntimeConfig, TurnInput, get_adapter
from runtimes.base import ProviderSpec, tagged_pids
from runtimes.events import Event
from runtimes.watchdog import WatchdogConfig

PLATFORM = {"codex": "openai-compat", "pi": "openai-compat", "acp": "openai-compat",
            "claude": "anthropic-compat"}
MODEL = {"codex": "gpt-5.5", "pi": "scripted-model", "acp": "gpt-5.5",
         "claude": "claude-sonnet-4-5"}


def make_config(runtime: str, base: Path, server_url: str, **overrides: Any) -> RuntimeConfig:
    workdir = base / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    url = server_url if PLATFORM[runtime] == "openai-compat" else server_url.rsplit("/v1", 1)[0]
    from tests.support import isolation

    isolation.reachable(base)
    params: dict[str, Any] = dict(
        isolation=isolation.backend(), runtime_user=isolation.runtime_user(),
        workdir=workdir, state_dir=base / "state",
        provider=ProviderSpec(platform=PLATFORM[runtime], base_url=url, api_key="test-key"),
        model=MODEL[runtime], watchdog=WatchdogConfig())
    params.update(overrides)
    return RuntimeConfig(**params)


async def collect(adapter: RuntimeAdapter, text: str,
                  on_event: Callable[[Event], Any] | None = None,
                  timeout: float = 120) -> list[Event]:
    events: list[Event] = []

    async def run() -> None:
        async for ev in adapter.run_turn(TurnInput(text)):
            events.append(ev)
            if on_event is not None:
                res = on_event(ev)
                if asyncio.iscoroutine(res):
                    await res

    await asyncio.wait_for(run(), timeout)
    return events


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def terminals(events: list[Event]) -> list[Event]:
    return [e for e in events if e.terminal]


def adapter_for(runtime: str, config: RuntimeConfig) -> RuntimeAdapter:
    return get_adapter(runtime)(config)


def assert_no_leak(tags: list[str]) -> None:
    leaked = {tag: tagged_pids(tag) for tag in tags}
    leaked = {k: v for k, v in leaked.items() if v}
    assert not leaked, f"runtime processes left behind: {leaked}"


def run_async(coro):
    """``asyncio.run`` in a fresh thread: safe even when this thread already runs an event
    loop (Playwright's sync API keeps one for the rest of the test session)."""
    from amux_common import aio

    return aio.run(coro, name="run-async")


def one_turn(runtime: str, config: RuntimeConfig, text: str
             ) -> tuple[RuntimeAdapter, list[Event]]:
    """Start a runtime, run one turn, close it: the adapter (for its tag) and the events."""

    async def main():
        adapter = adapter_for(runtime, config)
        try:
            await adapter.start()
            return adapter, await collect(adapter, text)
        finally:
            await adapter.close()

    return run_async(main())
