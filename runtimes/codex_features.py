"""Whether a Codex app-server may ask the user (``request_user_input``): the features probe.

Seed 000: Codex's ``request_user_input`` is switched on only when the binary's own read-only
``codex features list`` declares ``default_mode_request_user_input``; an explicit feature
flag among the session's native arguments (``-c features.default_mode_request_user_input=…``,
``--enable``/``--disable default_mode_request_user_input``) wins and skips the probe. A
binary that does not declare it keeps its native behaviour.

How a declared feature is applied: as a per-thread config override
(``thread/start``/``thread/resume`` ``config: {"features.default_mode_request_user_input":
true}``) on every new, resumed and cleared thread. The app-server is already running (and
its ``config.toml`` read) when the probe answers, since the probe runs beside
``initialize``; the thread override needs no restart, leaves the user's config files and
the collaboration mode alone, and was checked against the pinned binary (0.171.0): without
it a ``request_user_input`` call is answered "unavailable in Default mode", with it the
question reaches the client (tests/runtimes/test_codex_features.py).

The probe process runs as the agent does (same execution identity, isolation backend,
environment and work directory) under its own launch tag, so that stopping it never
reaches the agent's processes. It is bounded; when cancelled or late it gets SIGTERM, at
most ``TERM_GRACE`` seconds to let its launcher release shared locks (amux never deletes a
launcher's lock files), then SIGKILL with its own ``KILL_DEADLINE`` to be reaped. Its
result belongs to one adapter (one session, one identity) and is never cached or shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import errors
from .base import spawn, tagged_pids

FEATURE = "default_mode_request_user_input"
THREAD_CONFIG_KEY = f"features.{FEATURE}"
PROBE_TIMEOUT = 10.0
TERM_GRACE = 1.0
KILL_DEADLINE = 1.0
OUTPUT_LIMIT = 1024 * 1024

# how the decision was reached (runtime facts, tests)
BY_FLAG = "flag"  # an explicit native flag: Codex applies it itself
BY_PROBE = "probe"  # the features list declares it
NOT_DECLARED = "not_declared"  # the list has no such feature: native behaviour
PROBE_FAILED = "probe_failed"  # the probe failed or ran out of time: native behaviour
NO_USER_AGENT = "no_user_agent"  # the handshake named no user agent: result not adopted
OFF = "off"  # the session does not let the runtime ask (ticket workers)


def declared_features(listing: str) -> dict[str, str]:
    """``codex features list`` output (``name  stage  enabled`` per line) as
    {name: stage}; a ``removed`` feature is no longer declared."""
    found: dict[str, str] = {}
    for line in listing.splitlines():
        words = line.split()
        if len(words) < 3 or words[-1] not in ("true", "false"):
            continue
        name, stage = words[0], " ".join(words[1:-1])
        if stage != "removed":
            found[name] = stage
    return found


def _flag_value(text: str) -> bool | None:
    value = text.strip().strip("'\"").lower()
    return {"true": True, "false": False}.get(value)


def explicit_flag(args: Sequence[str]) -> bool | None:
    """The feature's value set explicitly among Codex's command-line arguments, else None
    (``-c``/``--config`` overrides in either spelling, ``--enable``/``--disable``)."""
    found: bool | None = None
    items = list(args)
    for i, arg in enumerate(items):
        following = items[i + 1] if i + 1 < len(items) else ""
        if arg in ("-c", "--config"):
            override = following
        elif arg.startswith("--config="):
            override = arg.split("=", 1)[1]
        elif arg.startswith("-c") and len(arg) > 2:
            override = arg[2:]
        elif arg in ("--enable", "--disable") and following == FEATURE:
            found = arg == "--enable"
            continue
        elif arg in (f"--enable={FEATURE}", f"--disable={FEATURE}"):
            found = arg.startswith("--enable")
            continue
        else:
            continue
        key, _, value = override.partition("=")
        key = key.strip()
        if key == THREAD_CONFIG_KEY:
            found = _flag_value(value)
        elif key == "features" and FEATURE in value:
            # an inline table: features={default_mode_request_user_input=true}
            tail = value.split(FEATURE, 1)[1].lstrip(" =")
            found = _flag_value(tail.split(",")[0].split("}")[0])
    return found


@dataclass(frozen=True)
class ProbeResult:
    """What the probe saw: the declared features, or why there is no answer."""

    features: dict[str, str] | None = None
    error: str | None = None
    pid: int | None = None  # the probe's process (tests check it is gone)


@dataclass(frozen=True)
class Decision:
    enabled: bool
    by: str
    detail: str = ""

    def as_fact(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "by": self.by,
                **({"detail": self.detail} if self.detail else {})}


def decide(*, ask_user: bool, flag: bool | None, probe: ProbeResult | None,
           user_agent: Any) -> Decision:
    """Whether amux turns the feature on for its threads (pure)."""
    if flag is not None:  # the explicit native flag wins (Codex applies it itself)
        return Decision(flag, BY_FLAG)
    if not ask_user:
        return Decision(False, OFF)
    if not (isinstance(user_agent, str) and user_agent.strip()):
        return Decision(False, NO_USER_AGENT, "initialize returned no userAgent")
    if probe is None or probe.features is None:
        return Decision(False, PROBE_FAILED, (probe.error if probe else "") or "no result")
    if FEATURE in probe.features:
        return Decision(True, BY_PROBE, probe.features[FEATURE])
    return Decision(False, NOT_DECLARED)


async def stop_probe(proc: asyncio.subprocess.Process, tag: str) -> None:
    """SIGTERM the probe's group, at most ``TERM_GRACE`` s, then SIGKILL it (and anything
    still carrying its tag) and reap it within ``KILL_DEADLINE`` s."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            sent = True
        except (ProcessLookupError, PermissionError):
            sent = False
        if sent:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), TERM_GRACE)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in tagged_pids(tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_DEADLINE)


async def run_probe(argv: list[str], env: dict[str, str], cwd: Any, tag: str,
                    spawn_kwargs: dict[str, Any], timeout: float = PROBE_TIMEOUT,
                    started: Any = None) -> ProbeResult:
    """Run ``codex features list`` bounded by ``timeout``; never raises for the probe's own
    failure (the answer is then "no result"). Cancelling it stops and reaps the process."""
    try:
        proc = await spawn(argv, env, cwd, **spawn_kwargs)
    except errors.RuntimeStartFailed as exc:
        return ProbeResult(error=str(exc))
    try:
        if started is not None:
            started(proc)  # e.g. the isolation check of who runs it
    except errors.RuntimeAdapterError as exc:
        await asyncio.shield(stop_probe(proc, tag))
        return ProbeResult(error=str(exc), pid=proc.pid)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()  # a read-only listing: nothing to read from us
    try:
        out, _err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        await asyncio.shield(stop_probe(proc, tag))
        return ProbeResult(error=f"no answer in {timeout:g} s", pid=proc.pid)
    except asyncio.CancelledError:
        await asyncio.shield(stop_probe(proc, tag))
        raise
    finally:
        if proc.returncode is None:
            await asyncio.shield(stop_probe(proc, tag))
    if proc.returncode != 0:
        return ProbeResult(error=f"exit status {proc.returncode}", pid=proc.pid)
    return ProbeResult(features=declared_features(out[:OUTPUT_LIMIT].decode(
        errors="replace")), pid=proc.pid)
