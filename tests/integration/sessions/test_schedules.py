"""Schedules: the REST shape and its refusals, ownership, pause/resume/delete, slots that
fire once with a controllable clock (beat's due check `fire_due(now)`), frozen settings,
and each mode once on the real Codex runtime against the scripted model server."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from effects import outbox
from effects.models import Effect
from execution import profiles, schedules
from execution.models import LaunchPreset, Schedule, ScheduleRun, TaskRun
from sessions.models import Session
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text
from tests.support.sessions import run_host, wait_for
from tests.support.workers import purge_queues

pytestmark = [pytest.mark.host_idle(2),
              pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

BASE = "/api/v1/schedules/"


@pytest.fixture
def other_api(django_user_model):
    user = django_user_model.objects.create_user("other", password="other-pass-123",
                                                 is_staff=True)
    client = APIClient()
    _, token = AuthToken.objects.create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _body(**overrides):
    body = {"name": "nightly", "every_seconds": 60, "mode": "subtask",
            "prompt": "Summarise the day.", "runtime": "codex", "model": "gpt-5.5"}
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize(("overrides", "field"), [
    ({"cron": "*/5 * * * *"}, "cron"),  # both cron and every_seconds
    ({"every_seconds": None}, "every_seconds"),  # neither
    ({"every_seconds": 5}, "every_seconds"),
    ({"every_seconds": "60"}, "every_seconds"),
    ({"every_seconds": None, "cron": "61 * * * *"}, "cron"),
    ({"every_seconds": None, "cron": "* * * *"}, "cron"),
    ({"every_seconds": None, "cron": "0 0 31 2 *"}, "cron"),
    ({"mode": "sometimes"}, "mode"),
    ({"mode": "reuse-session", "runtime": None}, "runtime"),
    ({"runtime": "nope"}, "runtime"),
    ({"prompt": "  "}, "prompt"),
    ({"extra_args": "--fast"}, "extra_args"),
    ({"profile": "no-such-expert"}, "profile"),
])
def test_bad_schedules_are_refused_naming_the_field(api, openai_provider, overrides, field):
    profiles.ensure_builtin()
    response = api.post(BASE, _body(**overrides), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()
    assert not Schedule.objects.exists()


def test_a_schedule_freezes_its_settings_and_belongs_to_its_owner(api, other_api,
                                                                 openai_provider):
    profiles.ensure_builtin()
    created = api.post(BASE, _body(extra_args=["-c", "model_reasoning_summary=none"]),
                       format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert (data["runtime"], data["model"], data["provider"], data["extra_args"]) == \
        ("codex", "gpt-5.5", "scripted", ["-c", "model_reasoning_summary=none"])
    assert data["execution"]["launch"] == "task" and data["paused"] is False
    assert data["next_fire_at"] and data["timing"] == "every 60 s"
    pk = data["id"]
    assert api.post(BASE, _body(), format="json").status_code == 409  # same name, same owner
    assert api.get(f"{BASE}{pk}").json()["name"] == "nightly"  # no trailing slash either
    # another caller sees none of it
    assert other_api.get(BASE).json()["count"] == 0
    for path in (f"{BASE}{pk}/", f"{BASE}{pk}/runs/"):
        assert other_api.get(path).status_code == 404
    assert other_api.post(f"{BASE}{pk}/pause/").status_code == 404
    assert other_api.delete(f"{BASE}{pk}/").status_code == 404
    # pause stops the clock, resume starts it from now
    paused = api.post(f"{BASE}{pk}/pause").json()
    assert paused["paused"] is True and paused["next_fire_at"] is None
    assert schedules.fire_due(timezone.now() + timedelta(days=1)) == []
    resumed = api.post(f"{BASE}{pk}/resume/").json()
    assert resumed["paused"] is False and resumed["next_fire_at"]
    assert api.get(f"{BASE}{pk}/runs/").json() == {"count": 0, "next": None,
                                                   "previous": None, "results": []}
    assert api.delete(f"{BASE}{pk}/").status_code == 204
    assert api.get(f"{BASE}{pk}/").status_code == 404


def test_a_cron_schedule_fires_on_its_minutes(operator, openai_provider):
    profiles.ensure_builtin()
    t0 = timezone.now().replace(hour=1, minute=7, second=30, microsecond=0)
    schedule = schedules.create_schedule(owner=operator, now=t0, data=_body(
        every_seconds=None, cron="*/5  * * * *"))
    assert schedule.cron == "*/5 * * * *"
    assert schedule.next_fire_at == t0.replace(minute=10, second=0)


def test_a_slot_fires_once_and_every_firing_keeps_the_frozen_settings(operator,
                                                                      openai_provider):
    """The due check with a controllable clock: every 10 s from t0, a repeated or late
    check writes no second run for a slot, a firing run again starts nothing new, and a
    default preset changed after the definition does not reach later firings."""
    purge_queues()
    profiles.ensure_builtin()
    t0 = timezone.now()
    schedule = schedules.create_schedule(owner=operator, now=t0, data=_body(
        name="every-ten", every_seconds=10, runtime=None, model=None))
    frozen = dict(schedule.execution)
    assert frozen["runtime"] == "codex" and frozen["preset"] == "codex"
    assert schedules.fire_due(t0 + timedelta(seconds=9)) == []
    first = schedules.fire_due(t0 + timedelta(seconds=10))
    assert len(first) == 1
    assert schedules.fire_due(t0 + timedelta(seconds=10, milliseconds=500)) == []
    assert schedules.fire_due(t0 + timedelta(seconds=12)) == []
    schedules.fire(first[0])
    schedules.fire(first[0])  # a retried message: the run has started, nothing new
    assert TaskRun.objects.count() == 1
    # the distribution default changes; the schedule keeps what it froze
    LaunchPreset.objects.filter(is_default=True).update(model="gpt-other")
    second = schedules.fire_due(t0 + timedelta(seconds=21))
    assert len(second) == 1
    schedules.fire(second[0])
    runs = list(ScheduleRun.objects.filter(schedule=schedule).order_by("slot"))
    assert [r.slot - t0 for r in runs] == [timedelta(seconds=10), timedelta(seconds=20)]
    tasks = [r.task for r in runs]
    assert all(t.execution == tasks[0].execution for t in tasks)
    assert (tasks[0].execution["runtime"], tasks[0].execution["model"]) == ("codex",
                                                                            "gpt-5.5")
    assert tasks[0].session_id != tasks[1].session_id  # a bounded task each time
    # missed slots are not caught up: one firing for the latest, then on the grid again
    later = schedules.fire_due(t0 + timedelta(seconds=95))
    assert len(later) == 1
    assert ScheduleRun.objects.get(pk=later[0]).slot == t0 + timedelta(seconds=30)
    assert Schedule.objects.get(pk=schedule.pk).next_fire_at == t0 + timedelta(seconds=100)
    # each run's firing is an outbox effect written with it (keyed by the run): it waits
    # there until a drainer sets the run going, and a replay of a started run starts nothing
    runs = ScheduleRun.objects.filter(schedule=schedule)
    assert set(Effect.objects.filter(kind="schedule.fire").values_list("key", flat=True)) \
        == {f"run:{run.pk}" for run in runs}
    assert ScheduleRun.objects.get(pk=later[0]).started_at is None
    outbox.drain(seconds=5)
    assert not Effect.objects.filter(kind="schedule.fire").exists()
    assert ScheduleRun.objects.get(pk=later[0]).started_at is not None
    assert TaskRun.objects.count() == 3
    purge_queues()


def _serve(session_id: int) -> threading.Thread:
    Session.objects.filter(pk=session_id).update(idle_timeout_s=2)
    host = threading.Thread(target=run_host, args=(session_id,))
    host.start()
    return host


def _fire_and_run(schedule, at, drain=False):
    """Beat's due check at ``at``, the firing task's body, then the session host."""
    (run_id,) = schedules.fire_due(at)
    run = schedules.fire(run_id)
    host = _serve(run.session_id)
    try:
        def done():
            if drain:
                outbox.drain(seconds=1)
            view = schedules.run_view(ScheduleRun.objects.get(pk=run_id))
            return view if view["state"] in ("succeeded", "failed", "cancelled") else None

        view = wait_for(done, timeout=120, interval=0.2)
    finally:
        host.join(120)
    return view


@pytest.mark.parametrize("mode", ["reuse-session", "new-session-per-run", "subtask"])
def test_each_mode_on_codex(mode, operator, openai_provider, session_dirs, model_server):
    require_runtime("codex")
    purge_queues()
    profiles.ensure_builtin()
    t0 = timezone.now()
    schedule = schedules.create_schedule(owner=operator, now=t0, data=_body(
        name=mode, every_seconds=10, mode=mode))
    model_server.script(Text("first report"), Text("second report"))
    one = _fire_and_run(schedule, t0 + timedelta(seconds=10), drain=mode == "subtask")
    two = _fire_and_run(schedule, t0 + timedelta(seconds=20), drain=mode == "subtask")
    assert (one["state"], one["result"]) == ("succeeded", "first report")
    assert (two["state"], two["result"]) == ("succeeded", "second report")
    if mode == "reuse-session":
        assert one["session"] == two["session"] == Schedule.objects.get(
            pk=schedule.pk).session_id
        assert Session.objects.get(pk=one["session"]).turns.count() == 2
    else:
        assert one["session"] != two["session"]
    assert (one["task"] is not None) == (mode == "subtask")
    sessions = Session.objects.filter(pk__in=[one["session"], two["session"]])
    assert {s.snapshot["execution"]["runtime"] for s in sessions} == {"codex"}
    assert {s.snapshot["execution"]["model"] for s in sessions} == {"gpt-5.5"}
    purge_queues()
