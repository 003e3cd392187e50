"""A schedule under real Celery beat and a real worker: every 10 s, two firings on the
slot grid, each a task on the real Codex runtime with the same frozen settings, no slot
fired twice."""

from __future__ import annotations

from datetime import timedelta

import pytest

from execution import profiles, schedules
from execution.models import ScheduleRun
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text
from tests.support.workers import amux_workers, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]


def test_beat_fires_a_schedule_twice_with_its_frozen_settings(operator, openai_provider,
                                                              session_dirs, model_server,
                                                              tmp_path):
    require_runtime("codex")
    purge_queues()
    profiles.ensure_builtin()
    model_server.script(Text("tick one"), Text("tick two"), Text("tick three"))
    schedule = schedules.create_schedule(owner=operator, data={
        "name": "heartbeat", "every_seconds": 10, "mode": "subtask",
        "prompt": "Say something short.", "runtime": "codex", "model": "gpt-5.5",
        "extra_args": ["-c", "model_reasoning_summary=none"]})
    workers = amux_workers("beat", worker_env(session_dirs), beat=True, sessions=2,
                           logs=tmp_path)

    def two_done():
        views = [schedules.run_view(r) for r in
                 ScheduleRun.objects.filter(schedule=schedule).order_by("slot")[:2]]
        return views if len(views) == 2 and all(v["state"] == "succeeded"
                                                for v in views) else None

    try:
        views = wait_for(two_done, timeout=150, interval=0.5)
        schedules.set_paused(owner=operator, schedule_id=schedule.pk, paused=True)
    finally:
        for worker in workers:
            worker.stop()
        purge_queues()
    runs = list(ScheduleRun.objects.filter(schedule=schedule).order_by("slot"))
    slots = [r.slot for r in runs]
    assert len(set(slots)) == len(slots)  # one run per slot
    assert slots[0] == schedule.anchor + timedelta(seconds=10)
    assert slots[1] - slots[0] == timedelta(seconds=10)
    # beat's due check runs every 2 s: a run is written within a tick or two of its slot
    lateness = [(r.fired_at - r.slot).total_seconds() for r in runs[:2]]
    print(f"schedule run lateness (s): {lateness}")
    assert all(0 <= late < 5 for late in lateness), lateness
    assert [v["result"] for v in views] == ["tick one", "tick two"]
    first, second = (runs[0].task.execution, runs[1].task.execution)
    assert first == second
    assert (first["runtime"], first["model"], first["extra_args"]) == \
        ("codex", "gpt-5.5", ["-c", "model_reasoning_summary=none"])
    assert runs[0].task.session_id != runs[1].task.session_id
