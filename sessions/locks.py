"""The one module of sessions' lock querysets, and the order they are taken in.

Each is FOR NO KEY UPDATE (``no_key``): it excludes every other writer of the row, but not
the inserts of rows that only refer to it (a model credential, a runtime identity), which
take a key share. The timeline writer's FOR UPDATE (below) still waits for it, and it for
that.

A transaction that locks several sessions rows takes the session's row first, then its
turn, then its native goal. The timeline writer's own lock of
the session row is the same one, made in plain SQL (sessions/timeline_sql.py). A writer that
needs only a turn's row locks that row alone (never its session by a join: Turn's default
ordering would join it), which cannot close a circle with one that holds the session."""

from __future__ import annotations

from sessions.models import Session, SessionGoal, Turn


def session(session_id: int, *only: str) -> Session:
    """The session row (Session.DoesNotExist if none); ``only``: the fields to read."""
    rows = Session.objects.select_for_update(no_key=True)
    return (rows.only(*only) if only else rows).get(pk=session_id)


def session_held(session_id: int) -> None:
    """The session row locked, nothing read (a writer of a row under it)."""
    Session.objects.select_for_update(no_key=True).filter(pk=session_id).values_list(
        "pk").first()


def turn(turn_id: int, *only: str) -> Turn | None:
    """The turn's row alone; ``only``: the fields to read."""
    rows = Turn.objects.select_for_update(no_key=True, of=("self",)).filter(pk=turn_id).order_by()
    return (rows.only(*only) if only else rows).first()


def goal(session_id: int) -> SessionGoal:
    """The session's native goal row (made if none), its session locked first."""
    session_held(session_id)
    row, _ = SessionGoal.objects.select_for_update(no_key=True).get_or_create(session_id=session_id)
    return row


def goal_if_any(session_id: int) -> SessionGoal | None:
    session_held(session_id)
    return SessionGoal.objects.select_for_update(no_key=True).filter(session_id=session_id).first()
