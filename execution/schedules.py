"""Schedules: a prompt fired on a cron expression or every N seconds (seed 000).

This module is the one writer of schedules and their runs: each command one durable
transaction, locks taken in execution/locks.py's order (a schedule, then its run, then the
session a firing posts to).

Beat runs one due check every few seconds (``sessions.schedules_due``, amux_site/celery.py):
it locks the schedules whose next slot has come, writes one ``ScheduleRun`` per slot
(unique ``(schedule, slot)``), moves the next slot on and writes each run's firing as an
outbox effect (``schedule.fire``, keyed by the run), in one transaction; the outbox's
leases and backoff carry the firing to a worker, so none is lost with a message. Firing a
run is idempotent: a run that already started (or failed) is left alone, so beat ticking
twice, two beats or a replayed effect fire a slot once. Slots missed while nothing ran are
not caught up: the schedule fires once for the latest of them.

The modes: ``reuse-session`` posts each firing's prompt to one session kept for the
schedule; ``new-session-per-run`` starts a fresh session per firing; ``subtask`` submits a
bounded TaskRun per firing (execution/task_runs.py). Execution settings are resolved when
the schedule is defined and frozen in ``Schedule.execution``.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from effects import outbox
from effects.models import EffectKind
from execution import launch, locks, profiles, schedule_timing, turn_results
from execution.core.launch_rules import DIRECT, TASK, CallerSettings, from_snapshot
from execution.models import Schedule, ScheduleMode, ScheduleRun, TaskRun
from execution.schedule_timing import TimingError
from execution.task_runs import task_given
from sessions import limits, ownership, services
from sessions.models import Lifecycle
from sessions.new_session import Launch, Prompting, SessionSpec
from sessions.services import CommandError

log = logging.getLogger(__name__)

MAX_NAME = 120
MAX_PROMPT = limits.PROMPT
SESSION_IDLE_TIMEOUT = 0  # a schedule's session sleeps once its firing's turn has settled
MODES = tuple(ScheduleMode.values)


def visible_to(user):
    return Schedule.objects.filter(owner=user)


def _text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CommandError(f"{field} must be a non-empty string", field=field)
    if len(value) > limit:
        raise CommandError(f"{field} is longer than {limit} characters", field=field)
    return value


def _optional_str(data: dict[str, Any], field: str) -> str | None:
    value = data.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise CommandError(f"{field} must be a string", field=field)
    return value.strip()


def _resolve(mode: str, data: dict[str, Any]) -> dict[str, Any]:
    """The execution settings every firing will use, resolved now (explicit settings win;
    a subtask that names no runtime takes the default preset's, as a task does)."""
    extra_args = data.get("extra_args")
    if extra_args is not None and not (isinstance(extra_args, list)
                                       and all(isinstance(a, str) for a in extra_args)):
        raise CommandError("extra_args must be a list of strings", field="extra_args")
    runtime = _optional_str(data, "runtime")
    if mode != ScheduleMode.SUBTASK and runtime is None:
        raise CommandError("runtime is required for a session schedule (a subtask without "
                           "one takes the default preset)", field="runtime")
    caller = CallerSettings(runtime=runtime, model=_optional_str(data, "model"),
                            provider=_optional_str(data, "provider"),
                            extra_args=tuple(extra_args) if extra_args is not None else None)
    settings = launch.resolve(TASK if mode == ScheduleMode.SUBTASK else DIRECT, caller)
    profiles.get_profile(_optional_str(data, "profile"))  # an unknown expert: 400 now
    return settings.as_snapshot()


def create_schedule(*, owner, data: dict[str, Any], now: datetime | None = None) -> Schedule:
    """``data``: name, cron | every_seconds, mode, prompt, runtime?, model?, provider?,
    profile?, extra_args?. Refusals raise ``CommandError`` naming the field."""
    if not isinstance(data, dict):
        raise CommandError("the body must be an object")
    name = _text(data.get("name"), "name", MAX_NAME).strip()
    try:
        cron, every = schedule_timing.check(data.get("cron"), data.get("every_seconds"))
    except TimingError as exc:
        raise CommandError(str(exc), field=exc.field) from exc
    mode = data.get("mode")
    if mode not in MODES:
        raise CommandError(f"mode must be one of {', '.join(MODES)}", field="mode")
    prompt = _text(data.get("prompt"), "prompt", MAX_PROMPT)
    execution = _resolve(mode, data)
    now = now or timezone.now()
    try:
        with transaction.atomic(durable=True):
            return Schedule.objects.create(
                owner=owner, name=name, cron=cron, every_seconds=every, mode=mode,
                prompt=prompt, profile=_optional_str(data, "profile") or "",
                execution=execution, anchor=now,
                next_fire_at=schedule_timing.next_slot(cron=cron, every_seconds=every,
                                                       anchor=now, after=now))
    except IntegrityError as exc:
        raise services.Conflict(f"you already have a schedule named {name!r}",
                                code="duplicate_name", field="name") from exc


def _owned(owner, schedule_id: int) -> Schedule:
    found = locks.schedule(owner, schedule_id)
    if found is None:
        raise CommandError(f"no schedule {schedule_id} of yours", code="not_found",
                           status=404)
    return found


def set_paused(*, owner, schedule_id: int, paused: bool,
               now: datetime | None = None) -> Schedule:
    """Pause stops firing; resume fires next at the first slot after now (nothing missed
    while paused is caught up)."""
    with transaction.atomic(durable=True):
        schedule = _owned(owner, schedule_id)
        if schedule.paused == paused:
            return schedule
        schedule.paused = paused
        schedule.next_fire_at = None if paused else _after(schedule, now or timezone.now())
        schedule.save(update_fields=["paused", "next_fire_at"])
        return schedule


def delete_schedule(*, owner, schedule_id: int) -> None:
    """The schedule and its run history go; sessions and tasks it started stay."""
    with transaction.atomic(durable=True):
        _owned(owner, schedule_id).delete()


def _after(schedule: Schedule, moment: datetime) -> datetime:
    return schedule_timing.next_slot(cron=schedule.cron, every_seconds=schedule.every_seconds,
                                     anchor=schedule.anchor, after=moment)


# ------------------------------------------------------------------------ firing
def fire_due(now: datetime | None = None) -> list[int]:
    """Beat's due check: one run per due slot, the next slot set, each run's firing an
    outbox effect of the same transaction. Returns the runs written."""
    now = now or timezone.now()
    fired: list[int] = []
    with transaction.atomic(durable=True):
        for schedule in locks.due_schedules(now):
            run, created = ScheduleRun.objects.get_or_create(schedule=schedule,
                                                             slot=schedule.next_fire_at)
            schedule.next_fire_at = _after(schedule, max(now, schedule.next_fire_at))
            schedule.save(update_fields=["next_fire_at"])
            if created:
                fired.append(run.pk)
        if fired:
            outbox.enqueue_many(EffectKind.SCHEDULE_FIRE,
                                [(f"run:{run_id}", {"run_id": run_id}) for run_id in fired])
    return fired


def fire_effect(effect_id: int, payload: dict) -> None:
    """The outbox handler of ``schedule.fire`` (registered in execution/wiring.py)."""
    fire(payload["run_id"])


def fire(run_id: int) -> ScheduleRun | None:
    """Set one run going (idempotent): its task, or its prompt posted to its session."""
    with transaction.atomic(durable=True):
        schedule, run = locks.schedule_run(run_id)
        if run is None or run.started_at is not None or run.error_code:
            return run
        try:
            with transaction.atomic():  # a savepoint: a refusal leaves nothing of the start
                _start(schedule, run)
        except CommandError as exc:
            run.error_code, run.error_message = exc.code, str(exc)
            run.save(update_fields=["error_code", "error_message"])
            log.warning("schedule %s run %s not fired: %s", schedule.pk, run.pk, exc)
        return run


def _start(schedule: Schedule, run: ScheduleRun) -> None:
    run.started_at = timezone.now()
    if schedule.mode == ScheduleMode.SUBTASK:
        frozen = schedule.execution
        task = task_given(owner=schedule.owner, prompt=schedule.prompt,
                           profile=schedule.profile or None, runtime=frozen["runtime"],
                           model=frozen["model"], provider=frozen["provider"],
                           extra_args=list(frozen.get("extra_args") or ()))
        run.task, run.session, run.turn_key = task, task.session, task.turn_key
    else:
        session = schedule.session if schedule.mode == ScheduleMode.REUSE_SESSION else None
        if session is None or session.lifecycle == Lifecycle.ARCHIVED:
            session = services.create_session(
                Launch(from_snapshot(schedule.execution)),
                Prompting(profile=schedule.profile or None),
                SessionSpec(name=f"schedule {schedule.name}"[:120],
                            idle_timeout_s=SESSION_IDLE_TIMEOUT,
                            scope=ownership.of_caller("schedule", schedule.owner)))
            if schedule.mode == ScheduleMode.REUSE_SESSION:
                schedule.session = session
                schedule.save(update_fields=["session"])
        run.session, run.turn_key = session, f"schedule:{schedule.pk}:run:{run.pk}"
        services.post_message(session.pk, schedule.prompt, key=run.turn_key)
    run.save(update_fields=["started_at", "task", "session", "turn_key"])


# ------------------------------------------------------------------------ reading
def run_view(run: ScheduleRun) -> dict[str, Any]:
    """A run as callers read it: its state follows its task or its turn (derived, never
    stored), ``pending`` until a worker has set it going."""
    view: dict[str, Any] = {"id": run.pk, "at": run.slot, "fired_at": run.fired_at,
                            "started_at": run.started_at, "session": run.session_id,
                            "task": run.task_id, "state": "pending", "result": None,
                            "error": None}
    if run.error_code:
        view.update(state="failed", error={"code": run.error_code,
                                           "message": run.error_message})
    elif run.task_id:
        task: TaskRun = run.task
        view.update(state=task.state, result=task.result or None)
        if task.error_code or task.error_message:
            view["error"] = {"code": task.error_code, "message": task.error_message}
    elif run.session_id and run.turn_key:
        found = turn_results.outcome(turn_results.turn_for_key(run.session_id, run.turn_key))
        view.update(state=found["state"], result=found["result"], error=found["error"])
    return view


def schedule_view(schedule: Schedule) -> dict[str, Any]:
    frozen = schedule.execution or {}
    last = schedule.runs.order_by("-slot").first()
    return {
        "id": schedule.pk, "name": schedule.name, "mode": schedule.mode,
        "cron": schedule.cron or None, "every_seconds": schedule.every_seconds,
        "timing": schedule_timing.describe(schedule.cron, schedule.every_seconds),
        "prompt": schedule.prompt, "profile": schedule.profile or None,
        "runtime": frozen.get("runtime"), "model": frozen.get("model"),
        "provider": frozen.get("provider"), "extra_args": list(frozen.get("extra_args") or []),
        "execution": frozen, "paused": schedule.paused,
        "next_fire_at": schedule.next_fire_at, "session": schedule.session_id,
        "last_run": run_view(last) if last else None, "created_at": schedule.created_at,
    }

