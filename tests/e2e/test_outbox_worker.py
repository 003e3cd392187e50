"""The outbox is drained by a real Celery worker: on commit (the kick) and by the beat sweep.

The test starts `celery worker` (queue `default`) against this test's database and Redis,
enqueues through the real outbox, never calls drain() itself, and stops the worker after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction

from effects import outbox
from effects.models import Effect

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def rec():
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    client.prefix = f"outbox-e2e:{uuid.uuid4().hex[:8]}"
    # A clean broker: no wake-up left over from other tests, no debounce flag.
    client.delete("default")
    from django.core.cache import cache

    cache.delete(outbox.KICK_FLAG)
    yield client
    keys = list(client.scan_iter(f"{client.prefix}:*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def start_worker(rec, tmp_path):
    procs = []

    def start(*, beat=False):
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="tests.e2e.outbox_worker_settings",
            AMUX_TEST_DB_NAME=str(connection.settings_dict["NAME"]),
            AMUX_TEST_PREFIX=rec.prefix,
            REDIS_URL=settings.REDIS_URL,
        )
        cmd = [
            sys.executable, "-m", "celery", "-A", "amux_site", "worker", "-Q", "default",
            "-P", "solo", "-c", "1", "-n", f"outbox-e2e-{uuid.uuid4().hex[:6]}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info",
            "-I", "tests.e2e.outbox_worker_handlers",
        ]
        if beat:
            cmd += ["-B", "-s", str(tmp_path / "celerybeat-schedule")]
        log = open(tmp_path / f"worker-{len(procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        proc.log_path = log.name
        procs.append(proc)
        end = time.monotonic() + 90
        while "ready." not in Path(log.name).read_text():
            if proc.poll() is not None or time.monotonic() > end:
                pytest.fail("worker did not start:\n" + Path(log.name).read_text()[-3000:])
            time.sleep(0.2)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_handled(rec, effect_id, proc, seconds=45):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = rec.hget(f"{rec.prefix}:handled", effect_id)
        if value is not None:
            return json.loads(value)
        time.sleep(0.2)
    pytest.fail("effect not handled:\n" + Path(proc.log_path).read_text()[-3000:])


def test_an_effect_is_handled_by_the_worker_after_commit(rec, start_worker):
    worker = start_worker()
    with transaction.atomic():
        effect = outbox.enqueue("deliver", "input-e2e", {"event": "issue_comment"})
        assert rec.llen("default") == 0, "no wake-up before commit"
    started = time.monotonic()
    assert wait_handled(rec, effect.pk, worker) == {"event": "issue_comment"}
    assert time.monotonic() - started < 30
    end = time.monotonic() + 10
    while Effect.objects.filter(pk=effect.pk).exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert not Effect.objects.filter(pk=effect.pk).exists()


def test_a_lost_wake_up_only_delays_the_beat_sweep_drains(rec, start_worker):
    effect = outbox.enqueue("deliver", "input-lost", {"event": "push"})
    rec.delete("default")  # the kick's message is lost before any worker saw it
    worker = start_worker(beat=True)
    assert wait_handled(rec, effect.pk, worker) == {"event": "push"}
    assert "effects.drain_outbox" in Path(worker.log_path).read_text()


def test_a_drain_queued_under_the_task_s_old_name_still_runs(rec, start_worker):
    """A broker that outlived the upgrade still holds `tickets.drain_outbox` messages (the
    name before the outbox left tickets): a new worker runs them as drains."""
    from amux_site.celery import app

    effect = outbox.enqueue("deliver", "input-old-name", {"event": "ping"})
    rec.delete("default")  # the kick under the new name is lost
    app.send_task("tickets.drain_outbox", queue="default")
    worker = start_worker()  # no beat: only the old-named message can drain it
    assert wait_handled(rec, effect.pk, worker) == {"event": "ping"}
    log = Path(worker.log_path).read_text()
    assert "Task tickets.drain_outbox[" in log and "Task effects.drain_outbox[" not in log
