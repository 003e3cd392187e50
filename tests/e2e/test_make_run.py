"""`manage.py amux run` (what `make run` calls) as an operator meets it.

A fresh data directory, a free port, no DATABASE_URL/REDIS_URL: SQLite and the embedded
Redis under honcho together with the web server, both workers, beat and the supervisor of
Lark long-connection receivers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from amux_site import embedded_redis, runtimes_install
from tests.integration.test_ops_runtimes_install import write_project

pytestmark = [pytest.mark.xdist_group("processes"), pytest.mark.e2e]

MANAGE = [sys.executable, "manage.py", "amux"]


def _env(data_dir: Path, port: int) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "AMUX_EMBEDDED_REDIS",
                        "AMUX_ADMIN_PASSWORD", "AMUX_LOG_FORMAT",
                        # the run counts under its own data directory, not the test's
                        "PROMETHEUS_MULTIPROC_DIR"}}
    env.update(AMUX_DATA_DIR=str(data_dir), AMUX_PORT=str(port), PYTHONUNBUFFERED="1",
               DJANGO_SETTINGS_MODULE="amux_site.settings",
               AMUX_RUNTIMES_DIR=str(_installed_runtimes(data_dir.parent / "runtimes")))
    return env


def _installed_runtimes(root: Path) -> Path:
    """A runtimes directory installed from its lockfile (stamp current): these runs
    neither need the agent runtimes nor may reinstall the checkout's own."""
    target = root / "node_modules"
    if not target.exists():
        write_project(root, "1.0.0")
        target.mkdir()
        (target / runtimes_install.STAMP).write_text(
            runtimes_install.lock_hash(root / "package-lock.json"))
    return target


def _amux(env, *args, timeout=60):
    return subprocess.run([*MANAGE, *args], env=env, cwd=settings.BASE_DIR, text=True,
                          capture_output=True, timeout=timeout)


def _start(env, log: Path):
    # A process group of its own, like a shell job: signals go to the whole group, as
    # Ctrl-C or a closing terminal does.
    return subprocess.Popen([*MANAGE, "run"], env=env, cwd=settings.BASE_DIR,
                            stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait_healthz(proc, port, log: Path, within: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        assert proc.poll() is None, f"amux run exited early:\n{log.read_text()[-3000:]}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"/healthz did not answer 200 within {within} s:\n{log.read_text()[-3000:]}")


def _wait_status(env, code, within=45.0):
    deadline = time.monotonic() + within
    while True:
        result = _amux(env, "status")
        if result.returncode == code or time.monotonic() > deadline:
            return result
        time.sleep(1)


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _login(port: int, password: str) -> int:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        page = client.get("/panel/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = client.post("/panel/login/", data={
            "username": "admin", "password": password, "csrfmiddlewaretoken": csrf})
        return answer.status_code


def _counted_by_an_earlier_run(metrics_dir: Path, times: int) -> None:
    metrics_dir.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", "from amux_common import metrics\n"
                    f"for _ in range({times}): metrics.delivery_refused('', 'unknown_source')"],
                   env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
                   cwd=settings.BASE_DIR, check=True, timeout=60)
    assert list(metrics_dir.glob("counter_*.db"))


@pytest.fixture
def data_dir(tmp_path):
    yield tmp_path / "data"
    # Whatever happened, leave no process behind.
    state = tmp_path / "data" / "run" / "state.json"
    if state.exists():
        subprocess.run([*MANAGE, "stop"], env=_env(tmp_path / "data", 1),
                       cwd=settings.BASE_DIR, capture_output=True, timeout=90)


def test_amux_run_serves_refuses_a_second_run_and_stops_cleanly(data_dir, tmp_path):
    port = embedded_redis.free_port()
    env = _env(data_dir, port)
    env["AMUX_METRICS_TOKEN"] = "scrape-me"
    _counted_by_an_earlier_run(data_dir / "run" / "metrics", times=5)
    log = tmp_path / "run-1.log"
    proc = _start(env, log)
    try:
        took = _wait_healthz(proc, port, log, within=60)
        print(f"/healthz answered 200 after {took:.1f} s")
        # the web process counts into the data directory's metrics, which the run emptied
        assert httpx.post(f"http://127.0.0.1:{port}/hooks/github/nope", content=b"{}",
                          timeout=10).status_code == 404
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10,
                            headers={"Authorization": "Token scrape-me"}).text
        assert 'amux_deliveries_refused_total{reason="unknown_source",source=""} 1.0' \
            in scraped, scraped

        status = _wait_status(env, 0)
        assert status.returncode == 0, status.stderr
        assert status.stdout == ""

        # a second run, even with a changed lockfile, is refused before it touches the
        # runtimes under the running one
        runtimes = Path(env["AMUX_RUNTIMES_DIR"])
        stamp = (runtimes / runtimes_install.STAMP).read_text()
        write_project(runtimes.parent, "9.9.9")
        (runtimes / "in-use").write_text("a runtime the running amux uses")
        second = _amux(env, "run")
        assert second.returncode != 0
        assert "already running on data directory" in second.stderr
        assert "runtimes" not in second.stdout + second.stderr
        assert (runtimes / "in-use").exists()
        assert (runtimes / runtimes_install.STAMP).read_text() == stamp

        printed = re.findall(r"password: (\S+)", log.read_text())
        assert len(printed) == 1
        assert _login(port, printed[0]) == 302

        tree = _descendants(proc.pid)
        assert len(tree) >= 6  # redis, web, two workers, beat, lark receivers (and helpers)
        assert any(b"lark_receivers" in _cmdline(pid) for pid in tree)
        redis_port = int(re.search(r"Running mode=standalone, port=(\d+)",
                                   log.read_text()).group(1))
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [pid for pid in tree if _alive(pid)]
    assert left == [], f"processes left behind: {left}"
    assert not embedded_redis._answers(redis_port)

    after = _amux(env, "status")
    assert after.returncode == 1, after.stderr
    assert "not running" in after.stderr


def test_amux_stop_is_a_stop_on_purpose(data_dir, tmp_path):
    port = embedded_redis.free_port()
    env = _env(data_dir, port)
    first = _start(env, tmp_path / "run-1.log")
    _wait_healthz(first, port, tmp_path / "run-1.log", within=60)
    tree = _descendants(first.pid)
    os.killpg(first.pid, signal.SIGHUP)  # the terminal closes: no orphans either
    assert first.wait(timeout=60) == 0
    assert [pid for pid in tree if _alive(pid)] == []
    assert _amux(env, "status").returncode == 1

    log = tmp_path / "run-2.log"
    proc = _start(env, log)
    try:
        _wait_healthz(proc, port, log, within=60)
        assert "password" not in log.read_text()  # printed once, on the first run only
        tree = _descendants(proc.pid)
        stop = _amux(env, "stop", timeout=90)
        assert stop.returncode == 0, stop.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [pid for pid in tree if _alive(pid)] == []
    status = _amux(env, "status")
    assert status.returncode == 3  # stopped on purpose: report once, do not restart
    assert "stopped by an operator" in status.stderr
    respecting = _amux(env, "status", "--respect-stop")
    assert respecting.returncode == 3  # a process manager restarting on 1 leaves it alone
    assert "stopped by an operator" in respecting.stderr


def _web_pid(root: int) -> int | None:
    return next((pid for pid in _descendants(root) if b"uvicorn" in _cmdline(pid)), None)


def test_a_crashed_child_starts_again_and_a_crash_loop_stops_everything(data_dir, tmp_path):
    """The web server killed once comes back by itself (logged, `amux run` goes on); killed
    again within the window (AMUX_RUN_RESTART_LIMIT=1 here) it is a crash loop: everything
    stops and `amux run` exits 1 for a process manager to take over."""
    port = embedded_redis.free_port()
    env = {**_env(data_dir, port), "AMUX_RUN_RESTART_LIMIT": "1"}
    log = tmp_path / "run.log"
    proc = _start(env, log)
    tree: set[int] = set()
    try:
        _wait_healthz(proc, port, log, within=60)
        first = _web_pid(proc.pid)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while (_web_pid(proc.pid) in (None, first)) and time.monotonic() < deadline:
            time.sleep(0.2)
        second = _web_pid(proc.pid)
        assert second not in (None, first), log.read_text()[-3000:]
        _wait_healthz(proc, port, log, within=30)  # served again, by the same `amux run`
        assert "web exited on its own (rc=-9); starting it again in 1 s" in log.read_text()
        tree = _descendants(proc.pid)
        os.kill(second, signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [pid for pid in tree if _alive(pid)] == []
    text = log.read_text()
    assert "web exited on its own 2 times within 300 s: a crash loop" in text
    assert "web kept exiting on its own (a crash loop); everything was stopped" in text
    assert _amux(env, "status").returncode == 1


PERIODIC = ("tickets.drain_outbox", "sessions.sweep", "outbox-sweep", "sessions-sweep")


@pytest.mark.slow  # four whole stacks: run, restart, upgrade and stop (60-90 s)
def test_a_failed_runtime_install_json_logs_private_files_backup_and_restart(data_dir,
                                                                             tmp_path):
    port = embedded_redis.free_port()
    env = _env(data_dir, port)
    # runtimes whose lockfile needs the registry, which is unreachable
    offline = write_project(tmp_path / "offline-runtimes", "1.0.0", deps=True)
    env.update(AMUX_RUNTIMES_DIR=str(offline), npm_config_registry="http://127.0.0.1:9/",
               npm_config_fetch_retries="0", npm_config_cache=str(tmp_path / "npm-cache"),
               AMUX_LOG_FORMAT="json")
    log = tmp_path / "run.log"
    proc = _start(env, log)
    try:
        _wait_healthz(proc, port, log, within=90)
        assert _wait_status(env, 0).returncode == 0
        first = json.loads((data_dir / "run" / "state.json").read_text())
        text = log.read_text()
        assert "agent runtimes not installed" in text and "ECONNREFUSED" in text

        doctor = _amux(env, "doctor", timeout=120)
        lines = {x.split()[1]: x for x in doctor.stdout.splitlines()}
        for runtime in ("codex", "pi", "claude", "acp"):
            assert lines[f"runtime:{runtime}"].startswith("warn"), doctor.stdout
            assert "missing" in lines[f"runtime:{runtime}"]
        assert lines["database"].startswith("ok")

        backup = _amux(env, "backup", "--to", str(tmp_path / "backups"))
        assert backup.returncode == 0, backup.stderr
        copy = Path(backup.stdout.strip())
        assert copy.parent == tmp_path / "backups" and copy.suffix == ".sqlite3"
        assert copy.stat().st_mode & 0o777 == 0o600
        with sqlite3.connect(copy) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert db.execute("SELECT username FROM auth_user").fetchall() == [("admin",)]

        time.sleep(11)  # two outbox sweeps, two session sweeps
        restart = _amux(env, "restart", timeout=180)
        assert restart.returncode == 0, restart.stderr + restart.stdout
        assert "amux restarted" in restart.stderr + restart.stdout
        again = json.loads((data_dir / "run" / "state.json").read_text())
        assert again["pid"] == first["pid"] == proc.pid  # in place: same process
        assert again["run_id"] != first["run_id"]
        assert proc.poll() is None
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200

        # `amux upgrade` on a running amux: nothing mid-turn, so back up, migrate, restart
        upgrade = _amux(env, "upgrade", "--timeout", "5", timeout=180)
        assert upgrade.returncode == 0, upgrade.stderr + upgrade.stdout
        assert f"amux: backed up to {data_dir / 'backups'}" in upgrade.stdout
        assert "amux: database migrated" in upgrade.stdout
        assert "amux restarted" in upgrade.stdout
        third = json.loads((data_dir / "run" / "state.json").read_text())
        assert third["pid"] == proc.pid and third["run_id"] != again["run_id"]

        private = [p for p in data_dir.rglob("*") if p.stat().st_mode & 0o077]
        assert private == [], [(str(p), oct(p.stat().st_mode)) for p in private]
        assert data_dir.stat().st_mode & 0o777 == 0o700

        stop = _amux(env, "stop", timeout=90)
        assert stop.returncode == 0, stop.stderr
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    entries = [json.loads(line) for line in log.read_text().splitlines()]  # all JSON
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    assert any(e["message"] == "amux: restarting" for e in entries)
    assert sum("amux: serving" in e["message"] for e in entries) == 3
    # the sweeps beat sends every 5 s leave no line (the workers' startup banner lists them)
    periodic = [e for e in entries if e["logger"].startswith("celery")
                and any(name in e["message"] for name in PERIODIC)]
    assert periodic == []
    assert any(e["logger"] == "celery.apps.worker" and "ready" in e["message"]
               for e in entries)
