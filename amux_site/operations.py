"""What `manage.py amux run|status|stop` share: the data directory's run lock and state.

DATA_DIR/run/ holds
- `amux.lock` — flock()ed exclusively by `amux run` for its whole life (and by the helper
  processes it forks, so it stays held while any child it started is alive);
- `state.json` — pid, port and start time of the running `amux run`;
- `stopped` — written by `amux stop`, removed by the next `amux run`: "stopped on purpose".

`amux restart` sends RESTART_SIGNAL to the running `amux run`, which stops its children
like Ctrl-C and then executes itself again in place: the same pid, terminal and process
manager, with the code now on disk (what `amux upgrade` needs).

Everything under the data directory is private to the service user: the processes run
with umask 077 (set in settings.py) and `amux run` tightens what older versions created —
all but what linux-dac sessions are given on purpose (amux_site.session_paths).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

# How the web process serves websockets (`amux run`, the tests' live server, the benches).
# The timeline sends every event to every attached client, so what counts is the CPU per
# frame per client: websockets' Sans-I/O implementation, and no permessage-deflate — its
# compression context is per connection, so each small frame would be compressed once per
# client (a third of the fan-out's CPU), to save a few hundred bytes. No client sends the
# timeline anything (commands go through the API), so a frame over 64 KiB closes the
# connection (1009) instead of being buffered up to uvicorn's default 16 MiB.
WS_MAX_FRAME = 64 * 1024
UVICORN_WS_ARGS = ("--ws", "websockets-sansio", "--ws-per-message-deflate", "false",
                   "--ws-max-size", str(WS_MAX_FRAME))

# Exit codes of `amux status` (CONTRACT.md).
HEALTHY, DOWN, DEGRADED, STOPPED = 0, 1, 2, 3
RESTART_SIGNAL = signal.SIGUSR1


class AlreadyRunning(RuntimeError):
    pass


def run_dir(data_dir: Path) -> Path:
    path = Path(data_dir) / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


def reset_metrics(metrics_dir: Path) -> None:
    """Start the counters of a new run at zero (Prometheus reads it as a counter reset): the
    files of the last run's processes would otherwise be added to this one's for ever, and a
    new process that got an old one's pid would carry on from its file."""
    for path in Path(metrics_dir).glob("*.db"):
        path.unlink(missing_ok=True)


def lock_path(data_dir: Path) -> Path:
    return run_dir(data_dir) / "amux.lock"


def state_path(data_dir: Path) -> Path:
    return run_dir(data_dir) / "state.json"


def marker_path(data_dir: Path) -> Path:
    return run_dir(data_dir) / "stopped"


def acquire_lock(data_dir: Path):
    """Hold the data directory for this process; AlreadyRunning if someone else does."""
    handle = open(lock_path(data_dir), "a+")  # noqa: SIM115 - held for the process's life
    for attempt in range(5):
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt == 4:
                handle.close()
                state = read_state(data_dir) or {}
                where = f", pid {state['pid']}" if "pid" in state else ""
                url = f", serving http://127.0.0.1:{state['port']}" if "port" in state else ""
                raise AlreadyRunning(
                    f"amux is already running on data directory {data_dir}{where}{url}. "
                    "Stop it first (Ctrl-C in its terminal or `manage.py amux stop`), or set "
                    "AMUX_DATA_DIR to another directory."
                ) from None
            time.sleep(0.05)  # a concurrent `amux status` probe holds it for microseconds
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def is_running(data_dir: Path) -> bool:
    """Whether an `amux run` (or a child it started) holds the data directory's lock."""
    path = Path(data_dir) / "run" / "amux.lock"
    if not path.exists():
        return False
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def write_state(data_dir: Path, **info) -> None:
    path = state_path(data_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    tmp.replace(path)


def read_state(data_dir: Path) -> dict | None:
    try:
        return json.loads((Path(data_dir) / "run" / "state.json").read_text())
    except (OSError, ValueError):
        return None


def clear_state(data_dir: Path) -> None:
    (Path(data_dir) / "run" / "state.json").unlink(missing_ok=True)


def mark_stopped(data_dir: Path) -> None:
    marker_path(data_dir).write_text(
        json.dumps({"at": datetime.now(UTC).isoformat(timespec="seconds")})
    )


def clear_stopped(data_dir: Path) -> None:
    marker_path(data_dir).unlink(missing_ok=True)


def stopped_at(data_dir: Path) -> str | None:
    try:
        return json.loads((Path(data_dir) / "run" / "stopped").read_text()).get("at", "?")
    except (OSError, ValueError):
        return None


def fetch_health(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> dict | None:
    """GET /healthz of the running server: its JSON (200 or 503), or None if no answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz", headers={"Host": host, "Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return {"http": response.status, **json.loads(response.read())}
    except urllib.error.HTTPError as exc:
        try:
            return {"http": exc.code, **json.loads(exc.read())}
        except ValueError:
            return {"http": exc.code, "checks": {}}
    except (OSError, ValueError):
        return None


def _failing(body: dict, required: bool) -> str:
    parts = []
    for name, check in body.get("checks", {}).items():
        if not check.get("ok") and check.get("required", True) == required:
            parts.append(f"{name} ({check.get('error', 'failing')})")
    return ", ".join(parts)


def status(data_dir: Path, host: str = "127.0.0.1",
           respect_stop: bool = False) -> tuple[int, str]:
    """(exit code, one line to print or "") for `amux status`.

    Not running is DOWN (1), except after `amux stop`: a stop by an operator that no
    `amux run` has undone since answers STOPPED (3), so a process manager that restarts on
    1 leaves a deliberate stop alone (CONTRACT.md). `respect_stop` (`--respect-stop`, the
    seed's spelling for the same rule) changes nothing beyond that: plain `status` already
    respects a deliberate stop."""
    if not is_running(data_dir):
        at = stopped_at(data_dir)
        if at is not None:
            return STOPPED, f"amux was stopped by an operator at {at} (`amux run` starts it)"
        return DOWN, f"down: amux is not running on data directory {data_dir}"
    state = read_state(data_dir)
    if not state or "port" not in state:
        return DOWN, "down: amux is starting or its run state is missing"
    body = fetch_health(int(state["port"]), host)
    if body is None:
        return DOWN, f"down: /healthz on port {state['port']} does not answer"
    if body["http"] != 200:
        return DOWN, f"down: /healthz answers {body['http']}: {_failing(body, True)}"
    if body.get("degraded"):
        return DEGRADED, f"degraded: {_failing(body, False)}"
    return HEALTHY, ""


def stop(data_dir: Path, timeout: float = 60.0) -> tuple[int, str]:
    """Mark the installation stopped on purpose and stop a running `amux run`."""
    mark_stopped(data_dir)
    if not is_running(data_dir):
        return 0, "amux was not running; marked as stopped on purpose"
    state = read_state(data_dir) or {}
    pid = state.get("pid")
    if pid is None:
        try:
            pid = int(lock_path(data_dir).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 1, "amux is running but its pid is unknown; stop it with Ctrl-C"
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while is_running(data_dir):
        if time.monotonic() > deadline:
            return 1, f"amux (pid {pid}) is still running after {timeout:.0f} s"
        time.sleep(0.2)
    return 0, "amux stopped"


def restart(data_dir: Path, host: str = "127.0.0.1",
            timeout: float = 120.0) -> tuple[int, str]:
    """Ask the running `amux run` to restart in place; wait until it is healthy again."""
    if not is_running(data_dir):
        return DOWN, "amux is not running; `make run` starts it"
    state = read_state(data_dir) or {}
    if "pid" not in state or "run_id" not in state:
        return DOWN, "amux is still starting; try again when `amux status` answers"
    try:
        os.kill(int(state["pid"]), RESTART_SIGNAL)
    except ProcessLookupError:
        return DOWN, f"amux (pid {state['pid']}) is gone"
    deadline = time.monotonic() + timeout
    code, line = DOWN, "did not start again"
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = read_state(data_dir) or {}
        if now.get("run_id") in (None, state["run_id"]):
            continue
        code, line = status(data_dir, host)
        if code == HEALTHY:
            return HEALTHY, f"amux restarted (pid {now['pid']}, http://127.0.0.1:{now['port']}/)"
    return code, f"amux did not come back healthy within {timeout:.0f} s: {line}"


def make_private(data_dir: Path, shared: Iterable[Path] = (),
                 searched: Iterable[Path] = ()) -> None:
    """Tighten what an older amux (or another umask) left readable: the data directory and
    its top-level entries to 0700 directories / 0600 files, and the files under run/ (the
    umask covers everything created from now on; work/ trees are closed by their 0700
    parent).

    Except what sessions need, as the code that creates it leaves it (session_paths): a
    `shared` path (a worker's commands, its gitconfig, the mirrors, the token directory) is
    left exactly as it is, and a `searched` directory — and every directory on the way to a
    shared or searched path — keeps the search bit for others (o+x, never read) that
    linux-dac gives it. Closing those on every restart broke every session resumed after
    it: `amux: command not found`, unreadable mirror objects, no git credential."""
    data_dir = Path(data_dir)
    keep = {Path(p) for p in shared}
    passable = {data_dir}
    for path in [*keep, *map(Path, searched)]:
        passable.update(p for p in [path, *path.parents]
                        if p == data_dir or data_dir in p.parents)
    passable -= keep
    entries = [data_dir, *data_dir.iterdir()]
    run = data_dir / "run"
    if run.is_dir():
        entries += list(run.iterdir())
    for path in entries:
        if path.is_symlink() or path in keep:
            continue
        with contextlib.suppress(OSError):
            if not path.is_dir():
                path.chmod(0o600)
            elif path in passable:
                path.chmod(0o700 | (path.stat().st_mode & 0o001))
            else:
                path.chmod(0o700)
