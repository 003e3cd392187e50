"""The timeline writer's hottest read in plain SQL: the session row locked, with what a
batch needs beside it (its turn's seq and key, whether task runs follow the session, the
session's last event seq), in one round trip and without compiling a queryset each time.

Built by the ORM it cost about 2 ms of Python per batch (a locked queryset with three
annotations) plus a second round trip for the last seq, on the host's database thread that
shares the interpreter with the loop pumping the runtime. The SQL text is made once from
the models' own metadata, so a field added to Session is read too.

PostgreSQL only (two statements in one simple query: the last seq is read by the second,
after the lock is held, in a snapshot of its own under READ COMMITTED, so it sees what
the previous holder of the lock committed); elsewhere the caller uses the ORM.
"""

from __future__ import annotations

import functools

from django.db import connection

from sessions.models import Session, TaskRun, TimelineEvent, Turn

RELAXED = "SET LOCAL synchronous_commit TO OFF; "


@functools.cache
def _sql(with_turn: bool, with_last: bool) -> tuple[str, tuple[str, ...]]:
    q = connection.ops.quote_name
    fields = tuple(f.attname for f in Session._meta.concrete_fields)
    table = q(Session._meta.db_table)
    cols = [f"{table}.{q(Session._meta.get_field(a).column)}" for a in fields]
    pk = f"{table}.{q(Session._meta.pk.column)}"
    if with_turn:
        turns, runs = q(Turn._meta.db_table), q(TaskRun._meta.db_table)
        cols += [f"(SELECT {q('seq')} FROM {turns} WHERE {q('id')} = %s)",
                 f"(SELECT {q('key')} FROM {turns} WHERE {q('id')} = %s)",
                 f"EXISTS (SELECT 1 FROM {runs} WHERE {runs}.{q('session_id')} = {pk})"]
    sql = f"SELECT {', '.join(cols)} FROM {table} WHERE {pk} = %s FOR UPDATE OF {table}"
    if with_last:
        events = q(TimelineEvent._meta.db_table)
        sql += (f"; SELECT {q('seq')} FROM {events} WHERE {q('session_id')} = %s "
                f"ORDER BY {q('seq')} DESC LIMIT 1")
    return sql, fields


def locked(session_id: int, turn_id: int | None, with_last: bool,
           relaxed: bool = False) -> Session:
    """The session row locked (Session.DoesNotExist if none), as ``timeline._locked``
    returns it; with ``with_last`` also ``last_event_seq`` (0 before the first event).
    ``relaxed``: the transaction commits without waiting for its WAL flush (``SET LOCAL
    synchronous_commit``), sent in the same round trip as the lock: one trip fewer for
    each progress batch, which is what a turn's terminal batch queues behind."""
    sql, fields = _sql(turn_id is not None, with_last)
    values = {"turn": turn_id, "session": session_id}
    with connection.cursor() as cursor:
        cursor.execute(RELAXED + sql if relaxed else sql,
                       [values[name] for name in _sql_params(turn_id is not None, with_last)])
        if relaxed:
            cursor.nextset()  # past the SET's (empty) result to the lock's row
        row = cursor.fetchone()
        if row is None:
            raise Session.DoesNotExist(f"no session {session_id}")
        if with_last:
            cursor.nextset()
            last = cursor.fetchone()
    values = [v if v is None else _convert(i, v) for i, v in enumerate(row[:len(fields)])]
    session = Session.from_db(connection.alias, list(fields), values)
    if turn_id is not None:
        session.turn_seq, session.turn_key, session.has_task_runs = row[len(fields):]
    if with_last:
        session.last_event_seq = last[0] if last else 0
    return session


def _convert(index: int, value):
    for convert, expression in _converters()[index]:
        value = convert(value, expression, connection)
    return value


@functools.cache
def _converters() -> list[list]:
    """Per column, what the ORM applies to a value read (e.g. JSON text to a dict)."""
    out = []
    for field in Session._meta.concrete_fields:
        col = field.get_col(Session._meta.db_table)
        out.append([(c, col) for c in [*connection.ops.get_db_converters(col),
                                       *field.get_db_converters(connection)]])
    return out


@functools.cache
def _sql_params(with_turn: bool, with_last: bool) -> tuple[str, ...]:
    names = ["turn", "turn"] if with_turn else []
    names.append("session")
    if with_last:
        names.append("session")
    return tuple(names)


@functools.cache
def _input_sql() -> str:
    q = connection.ops.quote_name
    turns, events = q(Turn._meta.db_table), q(TimelineEvent._meta.db_table)
    lock, _ = _sql(False, False)
    return (f"{lock}; SELECT (SELECT {q('seq')} FROM {turns} WHERE {q('session_id')} = %s "
            f"ORDER BY {q('seq')} DESC LIMIT 1), (SELECT {q('seq')} FROM {events} WHERE "
            f"{q('session_id')} = %s ORDER BY {q('seq')} DESC LIMIT 1), (SELECT {q('id')} "
            f"FROM {turns} WHERE {q('session_id')} = %s AND {q('key')} = %s)")


def locked_for_input(session_id: int, key: str | None
                     ) -> tuple[Session, int | None, int | None, int | None]:
    """For a new input: the session row locked, then (after the lock is held) its last
    turn seq, last event seq and the turn already queued with ``key``, in one round trip."""
    _, fields = _sql(False, False)
    with connection.cursor() as cursor:
        cursor.execute(_input_sql(), [session_id, session_id, session_id, session_id, key])
        row = cursor.fetchone()
        if row is None:
            raise Session.DoesNotExist(f"no session {session_id}")
        cursor.nextset()
        last_turn, last_event, existing = cursor.fetchone()
    values = [v if v is None else _convert(i, v) for i, v in enumerate(row)]
    return (Session.from_db(connection.alias, list(fields), values), last_turn, last_event,
            existing)
