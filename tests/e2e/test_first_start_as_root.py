"""A first start as root, as a new user on a fresh server or container meets it: `amux
run` with no configuration installs the pinned runtimes itself (under amux's umask 077)
and picks the isolation backend root gets; a Codex turn and a Pi turn then complete,
their runtimes running as the runtime user, not as root. No step by hand."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from amux_site import embedded_redis
from runtimes import isolation
from tests.e2e.test_make_run import _amux, _env, _start, _wait_healthz
from tests.support.isolation import as_root, reachable
from tests.support.model_server import ModelServer, Text

pytestmark = [pytest.mark.xdist_group("processes"), pytest.mark.e2e, pytest.mark.slow,
              as_root, pytest.mark.timeout(600)]


def _uninstalled_runtimes(root: Path) -> Path:
    """The checkout's pinned runtimes, not installed yet: amux installs them on start."""
    root.mkdir(parents=True)
    root.chmod(0o755)  # as `git clone` makes a checkout under a shell's umask 022
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(Path(settings.BASE_DIR) / name, root / name)
    return root / "node_modules"


def _wait(check, within: float, what: str):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"{what} within {within} s")


def _runtime_processes(runtimes_dir: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if runtimes_dir.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_a_first_start_as_root_installs_the_runtimes_and_runs_codex_and_pi_turns(tmp_path):
    port = embedded_redis.free_port()
    data_dir = tmp_path / "srv" / "amux-var"
    env = _env(data_dir, port)
    env.pop("AMUX_ISOLATION", None)  # what root gets with no configuration
    env["AMUX_RUNTIMES_DIR"] = str(_uninstalled_runtimes(tmp_path / "srv" / "fresh-runtimes"))
    reachable(tmp_path / "srv")  # pytest's own 0700 directory stands where /srv would be
    log = tmp_path / "run.log"
    with ModelServer() as model:
        model.responder = lambda body: Text("first start ok")
        proc = _start(env, log)
        try:
            _wait_healthz(proc, port, log, within=300)  # npm ci of the pinned runtimes
            assert "agent runtimes installed" in log.read_text()
            token = _amux(env, "token", "--user", "admin").stdout.strip()
            api = httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1",
                               headers={"Authorization": f"Token {token}"}, timeout=30)
            made = api.post("/providers/", json={
                "slug": "scripted", "platform": "openai-compat", "base_url": model.base_url,
                "api_key": "sk-first-start", "models": ["gpt-5.5"]})
            assert made.status_code == 201, made.text
            ids = {}
            for runtime in ("codex", "pi"):
                created = api.post("/sessions/", json={
                    "runtime": runtime, "provider": "scripted", "model": "gpt-5.5"})
                assert created.status_code == 201, created.text
                ids[runtime] = created.json()["id"]
                sent = api.post(f"/sessions/{ids[runtime]}/messages/",
                                json={"text": "hello from a first start"})
                assert sent.status_code in (201, 202), sent.text

            def completed(runtime):
                events = api.get(f"/sessions/{ids[runtime]}/timeline/").json()
                events = events.get("results", events) if isinstance(events, dict) else events
                types = [e["type"] for e in events]
                failures = [e["payload"] for e in events
                            if e["type"] in ("error", "turn.failed")]
                assert not failures, (runtime, failures)
                return "turn.completed" in types

            for runtime in ids:
                _wait(lambda r=runtime: completed(r), 180, f"no {runtime} turn completed")
            # the runtimes still run (idle, not yet asleep): none of them as root
            runtimes = _runtime_processes(env["AMUX_RUNTIMES_DIR"])
            assert runtimes, "no runtime process found"
            assert all(isolation.process_euid(pid) not in (None, 0) for pid in runtimes)
            doctor = _amux(env, "doctor", timeout=120)
            lines = {x.split()[1]: x for x in doctor.stdout.splitlines() if x.split()[1:]}
            assert lines["runtimes:access"].startswith("ok"), doctor.stdout
            backend = isolation.auto_backend()
            assert backend != isolation.PRIVATE_HOME  # root is isolated from something
        finally:
            _amux(env, "stop", timeout=90)
            if proc.poll() is None:
                proc.kill()
    assert [line for line in log.read_text().splitlines() if "Permission denied" in line] == []
