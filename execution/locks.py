"""The execution model's lock querysets, and the one order they are taken in.

Each is FOR NO KEY UPDATE (``no_key``): it excludes every other writer of the row, not the
inserts of rows that only refer to it (a task run naming its profile or instance). Rows of
one table are taken in pk order. A transaction that locks several takes them in this order:

  expert (profile) → launch presets → bot profile;
  schedule → its run → agent instance → a session's rows (sessions/locks.py) → task run.

A task run is locked last: its turn's start is told under the session's lock (the timeline's
writer), so nothing that holds a task run may go on to lock its session."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from execution.models import (
    AgentInstance,
    AgentProfile,
    BotProfile,
    LaunchPreset,
    Schedule,
    ScheduleRun,
    TaskRun,
)


def _for_update(queryset: QuerySet) -> QuerySet:
    # of=("self",): joined rows (a run's schedule, a preset's provider) are read, not locked
    return queryset.select_for_update(no_key=True, of=("self",)).order_by("pk")


def profile(slug: str) -> AgentProfile | None:
    return _for_update(AgentProfile.objects.filter(slug=slug)).first()


def presets_for(slug: str) -> list[LaunchPreset]:
    """The preset named ``slug`` and the current default (which a change may move), in pk
    order."""
    return list(_for_update(LaunchPreset.objects.filter(Q(slug=slug) | Q(is_default=True))))


def bot(slug: str) -> BotProfile | None:
    return _for_update(BotProfile.objects.filter(slug=slug)).first()


def schedule(owner, schedule_id: int) -> Schedule | None:
    """One of ``owner``'s schedules."""
    return _for_update(Schedule.objects.filter(owner=owner, pk=schedule_id)).first()


def due_schedules(now) -> QuerySet:
    """The schedules whose next slot has come; one another due check holds is skipped (it
    fires it)."""
    return (Schedule.objects.select_for_update(no_key=True, skip_locked=True)
            .filter(paused=False, next_fire_at__lte=now).order_by("pk"))


def schedule_run(run_id: int) -> tuple[Schedule, ScheduleRun] | tuple[None, None]:
    """A schedule's run, its schedule locked first."""
    schedule_id = ScheduleRun.objects.filter(pk=run_id).values_list(
        "schedule_id", flat=True).first()
    if schedule_id is None:
        return None, None
    locked = _for_update(Schedule.objects.filter(pk=schedule_id)).first()
    run = _for_update(ScheduleRun.objects.filter(pk=run_id)).select_related("schedule").first()
    return locked, run


def instance(owner, instance_id: int) -> AgentInstance | None:
    """One of ``owner``'s instances (its session read with it, not locked)."""
    return (_for_update(AgentInstance.objects.filter(owner=owner, pk=instance_id))
            .select_related("session").first())


def task_run_of_turn(session_id: int, turn_key: str) -> TaskRun | None:
    return _for_update(TaskRun.objects.filter(session_id=session_id, turn_key=turn_key)).first()
