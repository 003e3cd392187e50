"""One command amux runs in a session's work directory on amux's behalf (a goal's check),
started the way the session's runtime is: under its isolation backend, as its identity,
in its sandbox. What the command runs was written by the agent (a Makefile, a test
script): it must never run as amux's own user with amux's environment.

The environment is clean: the session's private HOME and TMPDIR, the system PATH and a
locale; nothing of amux's, of the provider's or of the caller's extra environment. The
whole process group is killed at the deadline (and every process that left the group but
kept the command's tag). Output is read as it comes and capped, so a chatty command
neither blocks on a full pipe nor fills amux's memory.

Pure: no Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from amux_common.processes import die_with_parent

from . import errors
from .base import SYSTEM_PATH, RuntimeConfig, kill_process_group
from .isolation import Launch

READ_CHUNK = 64 * 1024


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None: it did not finish (timed out) or could not start
    output: str  # stdout and stderr interleaved, at most ``cap`` bytes of it
    timed_out: bool = False
    truncated: bool = False
    error: str = ""  # why it could not start (the backend refused, no shell)
    seconds: float = 0.0


def clean_env(config: RuntimeConfig, tag: str) -> dict[str, str]:
    """The session's own HOME and TMPDIR (made if missing), the system PATH, a locale."""
    home, tmp = config.state_dir / "home", config.state_dir / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "TMPDIR": str(tmp), "PATH": SYSTEM_PATH,
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1",
            "AMUX_RUNTIME_TAG": tag}


async def run(config: RuntimeConfig, argv: list[str], *, timeout: float,
              cap: int) -> CommandResult:
    """Run ``argv`` in the session's work directory under its backend; never raises for
    the command's own failure (a start the backend refuses is reported in ``error``)."""
    started = time.monotonic()
    tag = f"check-{uuid.uuid4().hex[:12]}"
    try:
        launch = Launch.prepare(config.isolation, config.runtime_user, config.state_dir,
                                config.workdir, None, config.workdir_roots,
                                shared_group=config.runtime_group,
                                # the runtime's own fence: a check reaches what it does
                                amux_url=config.amux_url,
                                provider_url=config.provider.base_url,
                                mcp_urls=tuple(s.url for s in config.mcp_servers),
                                loopback_fence=config.loopback_fence)
        launch.prepare_side_command()
        env = launch.environment(clean_env(config, tag), config.workdir)
        proc = await asyncio.create_subprocess_exec(
            *launch.command(argv), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
            cwd=str(config.workdir), start_new_session=True,
            preexec_fn=die_with_parent(signal.SIGKILL), **launch.spawn_kwargs())
        launch.verify(proc.pid)
    except (errors.RuntimeAdapterError, OSError) as exc:
        return CommandResult(None, "", error=str(exc),
                             seconds=time.monotonic() - started)
    kept = bytearray()
    truncated = False

    async def drain() -> None:
        nonlocal truncated
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(READ_CHUNK):
            room = cap - len(kept)
            if len(chunk) > room:
                truncated = True
            kept.extend(chunk[:max(room, 0)])

    reader = asyncio.ensure_future(drain())
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        timed_out = True
    finally:
        # its background children too: a check must not outlive its deadline
        await kill_process_group(proc, tag, grace=0.5 if timed_out else 0.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reader, 2.0)
        reader.cancel()
    return CommandResult(None if timed_out else proc.returncode,
                         kept.decode("utf-8", "replace"), timed_out=timed_out,
                         truncated=truncated, seconds=time.monotonic() - started)


def shell(command: str) -> list[str]:
    return ["/bin/sh", "-c", command]


def workdir_exists(config: RuntimeConfig) -> bool:
    return Path(config.workdir).is_dir() and os.access(config.workdir, os.X_OK)
