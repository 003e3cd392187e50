"""Concurrent drainers in separate OS processes over one outbox (PostgreSQL).

Each drainer is `tests/integration/outbox_drainer.py` running the real drain() against this
test's database; its handlers record into Redis what ran, when and how often.
On SQLite the same processes run too (claims are serialised by SQLite's single writer
instead of `FOR UPDATE SKIP LOCKED` and an advisory lock); only the 10,000-effect run is
kept to PostgreSQL.
"""

from __future__ import annotations

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
from django.db import connection

from effects import outbox
from effects.models import Effect
from effects.outbox import KINDS

pytestmark = [pytest.mark.serial, pytest.mark.django_db(transaction=True)]
needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="10,000 effects through SQLite's single writer take minutes; the same rules are "
    "proven on SQLite by the smaller multi-process tests below and by "
    "test_outbox_semantics.py (set DATABASE_URL to run this on PostgreSQL)",
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def rec():
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    prefix = f"outbox-test:{uuid.uuid4().hex[:8]}"
    client.prefix = prefix
    yield client
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)


def start(rec, *, victim=False, lease=None, seconds=240):
    env = dict(os.environ)
    env.update(
        AMUX_TEST_DB_NAME=connection.settings_dict["NAME"],
        AMUX_TEST_PREFIX=rec.prefix,
        AMUX_TEST_SECONDS=str(seconds),
        REDIS_URL=settings.REDIS_URL,
    )
    if victim:
        env["AMUX_TEST_VICTIM"] = "1"
    if lease:
        env["AMUX_OUTBOX_LEASE_SECONDS"] = str(lease)
        # These drainers call drain() directly, but start-up still checks the rule.
        env["AMUX_OUTBOX_TASK_TIME_LIMIT"] = str(lease / 3)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.outbox_drainer"], cwd=ROOT, env=env
    )


def wait_all(procs, timeout=600):
    end = time.monotonic() + timeout
    for proc in procs:
        proc.wait(timeout=max(1, end - time.monotonic()))
        assert proc.returncode == 0


def bulk_enqueue(specs):
    """Enqueue through the real outbox, 500 per transaction (as the engine would batch)."""
    ids = []
    for start_at in range(0, len(specs), 500):
        from django.db import transaction

        with transaction.atomic():
            for kind, key, payload, channel in specs[start_at:start_at + 500]:
                ids.append(outbox.enqueue(kind, key, payload, channel=channel).pk)
    return ids


@needs_postgres
@pytest.mark.timeout(900)
def test_four_drainers_run_10000_effects_each_to_success_never_twice_at_once(rec):
    specs = []
    for n in range(10_000):
        kind = ["deliver", "session.turn_ended", "relay", "notice", "dispatch"][n % 5]
        channel = f"thread-{n % 400}" if kind in ("relay", "notice") else ""
        payload = {"n": n, "channel": channel}
        if n % 53 == 3:
            payload["fail"] = 1  # one transient error, then success after a backoff
        if n % 31 == 7:
            payload["later"] = 2  # "not now" twice
        specs.append((kind, f"{kind}-{n}", payload, channel))
    ids = bulk_enqueue(specs)
    assert Effect.objects.count() == 10_000

    procs = [start(rec) for _ in range(4)]
    wait_all(procs)

    assert not Effect.objects.exists(), "every row was deleted after its handler succeeded"
    done = rec.hgetall(f"{rec.prefix}:done")
    assert len(done) == 10_000 and set(map(int, done)) == set(ids)
    assert set(done.values()) == {"1"}, "each effect succeeded exactly once"
    calls = {int(k): int(v) for k, v in rec.hgetall(f"{rec.prefix}:calls").items()}
    by_id = dict(zip(ids, specs, strict=True))
    for effect_id, (_, _, payload, _) in by_id.items():
        assert calls[effect_id] == 1 + payload.get("fail", 0) + payload.get("later", 0)
    assert rec.lrange(f"{rec.prefix}:overlap", 0, -1) == [], "two handlers ran one effect"
    expected: dict[str, list[int]] = {}
    for _, _, payload, channel in specs:
        if channel:
            expected.setdefault(channel, []).append(payload["n"])
    assert len(expected) == 160
    for channel, numbers in expected.items():
        order = [int(n) for n in rec.lrange(f"{rec.prefix}:order:{channel}", 0, -1)]
        assert order == numbers, f"channel {channel} out of order"
    finished = rec.hgetall(f"{rec.prefix}:finished")
    assert len(finished) == 4 and sum(map(int, finished.values())) == 10_000
    assert sum(1 for v in finished.values() if int(v) > 0) >= 2, "the work was shared"
    for kind, policy in KINDS.items():
        seen = [int(v) for v in rec.lrange(f"{rec.prefix}:seen:{kind}", 0, -1)]
        assert max(seen, default=0) <= policy.concurrency


def test_per_kind_concurrency_limits_hold_across_drainers(rec):
    specs = [("assess", f"eval-{n}", {"n": n, "sleep": 0.1}, "") for n in range(40)]
    specs += [("dispatch", f"assignment-{n}", {"n": n, "sleep": 0.05}, "") for n in range(40)]
    bulk_enqueue(specs)
    procs = [start(rec) for _ in range(4)]
    wait_all(procs)
    assert not Effect.objects.exists()
    assess = [int(v) for v in rec.lrange(f"{rec.prefix}:seen:assess", 0, -1)]
    assert len(assess) == 40
    assert max(assess) == KINDS["assess"].concurrency == 2, "two assessments ran side by side"
    dispatch = [int(v) for v in rec.lrange(f"{rec.prefix}:seen:dispatch", 0, -1)]
    assert max(dispatch) <= KINDS["dispatch"].concurrency


def test_order_holds_per_channel_across_drainers_behind_a_failing_head(rec):
    specs = []
    for n in range(200):
        channel = f"chat-{n % 4}"
        payload = {"n": n, "channel": channel}
        if n == 0:
            payload["fail"] = 2  # chat-0's head fails twice (about 3 s of backoff)
        specs.append(("notice" if n % 2 else "relay", f"m-{n}", payload, channel))
    bulk_enqueue(specs)
    procs = [start(rec) for _ in range(4)]
    time.sleep(1.0)
    # While chat-0's head is backing off, the other channels proceed and chat-0 waits.
    assert rec.llen(f"{rec.prefix}:order:chat-0") == 0
    wait_all(procs)
    for c in range(4):
        order = [int(n) for n in rec.lrange(f"{rec.prefix}:order:chat-{c}", 0, -1)]
        assert order == list(range(c, 200, 4))
    assert not Effect.objects.exists()


def test_a_drainer_killed_mid_batch_loses_nothing_and_the_others_finish_its_rows(rec):
    lease = 3
    specs = [("deliver", f"input-{n}", {"n": n}, "") for n in range(600)]
    specs += [
        ("relay", f"report-{n}", {"n": n, "channel": f"t-{n % 3}"}, f"t-{n % 3}")
        for n in range(60)
    ]
    ids = bulk_enqueue(specs)
    victim = start(rec, victim=True, lease=lease)
    end = time.monotonic() + 60
    while not rec.get(f"{rec.prefix}:victim"):
        assert time.monotonic() < end and victim.poll() is None, "the victim never started"
        time.sleep(0.05)
    stuck = int(rec.get(f"{rec.prefix}:victim"))
    held = set(Effect.objects.filter(claimed_by__contains=f":{victim.pid}:")
               .values_list("pk", flat=True))
    assert stuck in held and len(held) > 1, "the victim holds a batch"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)

    others = [start(rec, lease=lease) for _ in range(3)]
    wait_all(others)
    assert not Effect.objects.exists(), "nothing was lost"
    done = {int(k) for k in rec.hgetall(f"{rec.prefix}:done")}
    assert done == set(ids), "every effect, the victim's batch included, succeeded"
    assert stuck in done
    for c in range(3):
        order = [int(n) for n in rec.lrange(f"{rec.prefix}:order:t-{c}", 0, -1)]
        deduped = [n for i, n in enumerate(order) if i == 0 or order[i - 1] != n]
        assert deduped == list(range(c, 60, 3)), "order held through the crash"
