"""`amux status` / `amux stop` and the data directory's run lock (amux_site/operations.py).

The full `amux run` process tree is exercised in tests/e2e/test_make_run.py; here the
states are built from real pieces: a real lock held by a real process, pytest-django's
live server answering /healthz, real heartbeat keys in Redis.
"""

import signal
import subprocess
import sys
import textwrap
import time

import pytest
import redis
from django.conf import settings

from amux_site import embedded_redis, heartbeat, operations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_heartbeats():
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=heartbeat.PREFIX + "*"):
        client.delete(key)
    yield
    for key in client.scan_iter(match=heartbeat.PREFIX + "*"):
        client.delete(key)


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from amux_site import operations
    lock = operations.acquire_lock(Path(sys.argv[1]))
    print("locked", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def lock_holder(tmp_path):
    """A real process holding the data directory's lock, like `amux run` does."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, cwd=settings.BASE_DIR)
    assert proc.stdout.readline().strip() == "locked"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_not_running_is_down(tmp_path):
    code, line = operations.status(tmp_path)
    assert code == operations.DOWN == 1
    assert "not running" in line


def test_stopped_by_an_operator_is_3_with_or_without_respect_stop(tmp_path):
    code, line = operations.stop(tmp_path)
    assert code == 0 and "not running" in line
    code, line = operations.status(tmp_path)
    assert code == operations.STOPPED == 3
    assert "stopped by an operator" in line
    code, line = operations.status(tmp_path, respect_stop=True)
    assert code == operations.STOPPED == 3
    assert "stopped by an operator" in line


def test_respect_stop_changes_nothing_without_a_stop(tmp_path):
    assert operations.status(tmp_path, respect_stop=True)[0] == operations.DOWN
    operations.mark_stopped(tmp_path)
    operations.clear_stopped(tmp_path)  # what the next `amux run` does
    assert operations.status(tmp_path, respect_stop=True)[0] == operations.DOWN


def test_restart_refuses_when_nothing_runs(tmp_path):
    code, line = operations.restart(tmp_path)
    assert code == operations.DOWN and "not running" in line


def test_a_second_holder_of_the_data_directory_is_refused(tmp_path, lock_holder):
    assert operations.is_running(tmp_path)
    with pytest.raises(operations.AlreadyRunning, match="already running on data directory"):
        operations.acquire_lock(tmp_path)
    lock_holder.kill()
    lock_holder.wait()
    assert not operations.is_running(tmp_path)
    operations.acquire_lock(tmp_path).close()


def test_running_but_healthz_not_answering_is_down(tmp_path, lock_holder):
    operations.write_state(tmp_path, pid=lock_holder.pid, port=embedded_redis.free_port())
    code, line = operations.status(tmp_path)
    assert code == operations.DOWN
    assert "does not answer" in line


def _serve(tmp_path, lock_holder, live_server):
    port = int(live_server.url.rsplit(":", 1)[1])
    operations.write_state(tmp_path, pid=lock_holder.pid, port=port)


def test_running_without_workers_or_beat_is_degraded(tmp_path, lock_holder, live_server):
    _serve(tmp_path, lock_holder, live_server)
    heartbeat.worker_alive("default@test", ["default"])
    code, line = operations.status(tmp_path)
    assert code == operations.DEGRADED == 2
    assert line.startswith("degraded:") and "worker:runtime" in line and "beat" in line
    assert "worker:default" not in line


def test_running_with_everything_alive_is_healthy_and_silent(tmp_path, lock_holder,
                                                             live_server):
    _serve(tmp_path, lock_holder, live_server)
    heartbeat.worker_alive("default@test", ["default"])
    heartbeat.worker_alive("runtime@test", ["runtime"])
    heartbeat.beat_alive()
    assert operations.status(tmp_path) == (operations.HEALTHY, "")


def test_stop_terminates_the_running_process_and_marks_it(tmp_path, lock_holder):
    operations.write_state(tmp_path, pid=lock_holder.pid, port=1)
    started = time.monotonic()
    code, line = operations.stop(tmp_path, timeout=20)
    assert (code, line) == (0, "amux stopped")
    assert lock_holder.wait(timeout=5) == -signal.SIGTERM
    assert time.monotonic() - started < 20
    assert operations.status(tmp_path, respect_stop=True)[0] == operations.STOPPED


def test_run_refuses_a_port_in_use_with_a_clear_message(monkeypatch):
    import socket

    from django.core.management import CommandError, call_command

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("AMUX_PORT", str(taken.getsockname()[1]))
        with pytest.raises(CommandError, match="is in use; set AMUX_PORT"):
            call_command("amux", "run")
    monkeypatch.setenv("AMUX_PORT", "eighty")
    with pytest.raises(CommandError, match="AMUX_PORT must be a TCP port number"):
        call_command("amux", "run")
    assert not operations.is_running(settings.DATA_DIR)
