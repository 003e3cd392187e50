"""The one module of sessions' lock querysets, and the order they are taken in.

A transaction that locks several sessions rows takes the session's row first, then its
turn, then its native goal; a schedule before its runs. The timeline writer's own lock of
the session row is the same one, made in plain SQL (sessions/timeline_sql.py). A writer that
needs only a turn's row locks that row alone (never its session by a join: Turn's default
ordering would join it), which cannot close a circle with one that holds the session."""

from __future__ import annotations

from sessions.models import Schedule, ScheduleRun, Session, SessionGoal, Turn


def session(session_id: int, *only: str) -> Session:
    """The session row (Session.DoesNotExist if none); ``only``: the fields to read."""
    rows = Session.objects.select_for_update()
    return (rows.only(*only) if only else rows).get(pk=session_id)


def session_held(session_id: int) -> None:
    """The session row locked, nothing read (a writer of a row under it)."""
    Session.objects.select_for_update().filter(pk=session_id).values_list("pk").first()


def turn(turn_id: int, *only: str) -> Turn | None:
    """The turn's row alone; ``only``: the fields to read."""
    rows = Turn.objects.select_for_update(of=("self",)).filter(pk=turn_id).order_by()
    return (rows.only(*only) if only else rows).first()


def goal(session_id: int) -> SessionGoal:
    """The session's native goal row (made if none), its session locked first."""
    session_held(session_id)
    row, _ = SessionGoal.objects.select_for_update().get_or_create(session_id=session_id)
    return row


def goal_if_any(session_id: int) -> SessionGoal | None:
    session_held(session_id)
    return SessionGoal.objects.select_for_update().filter(session_id=session_id).first()


def schedule_run(run_id: int) -> tuple[Schedule, ScheduleRun] | tuple[None, None]:
    """A schedule's run, its schedule locked first."""
    schedule_id = ScheduleRun.objects.filter(pk=run_id).values_list(
        "schedule_id", flat=True).first()
    if schedule_id is None:
        return None, None
    schedule = Schedule.objects.select_for_update().get(pk=schedule_id)
    run = (ScheduleRun.objects.select_for_update(of=("self",)).select_related("schedule")
           .filter(pk=run_id).first())
    return schedule, run
