"""The real ASGI app (HTTP + websockets through Channels) under uvicorn, as a child process
of a test, on the test's database and Redis."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from amux_site.operations import UVICORN_WS_ARGS
from tests.support.workers import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AsgiServer:
    def __init__(self, env: dict[str, str], log: Path | None = None, workers: int = 1,
                 port: int | None = None, log_level: str = "warning"):
        self.ws_args = UVICORN_WS_ARGS  # as `amux run` serves them
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
        env = {**env, "AMUX_ALLOWED_HOSTS": "127.0.0.1,localhost"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "amux_site.asgi:application", "--host",
             "127.0.0.1", "--port", str(self.port), "--lifespan", "off", "--log-level",
             log_level, *self.ws_args, "--workers", str(workers)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {self.proc.returncode}")
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=2).read()
                return
            except urllib.error.HTTPError:
                return  # it answers (a failing health check is not this test's concern)
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("uvicorn did not answer /healthz")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
