"""The timeline writer's hottest reads in plain SQL, the one path on every database: the
session row locked, with what a batch needs beside it (its turn's seq and key, the session's
last event seq), without compiling a queryset each time.

Built by the ORM it cost about 2 ms of Python per batch (a locked queryset with three
annotations) plus a second round trip for the last seq, on the host's database thread that
shares the interpreter with the loop pumping the runtime. The SQL text is made once from
the models' own metadata (tables, columns, the ORM's converters), so a field added to
Session is read too and a renamed column needs no edit here.

The statements are the same on PostgreSQL and SQLite but for the lock clause (``FOR
UPDATE OF``; SQLite has one writer at a time already). PostgreSQL gets them in one simple
query (one round trip: the last seq is read by the second statement, after the lock is
held, in a snapshot of its own under READ COMMITTED, so it sees what the previous holder
of the lock committed); SQLite, in process, one after the other.
"""

from __future__ import annotations

import functools

from django.db import connection

from sessions.models import Session, TimelineEvent, Turn

RELAXED = "SET LOCAL synchronous_commit TO OFF"


def _batched() -> bool:
    """Several statements in one execute: one round trip (PostgreSQL's simple query)."""
    return connection.vendor == "postgresql"


def _run(cursor, statements: list[str], params: list[list]) -> list:
    """Each statement's first row, in order; in one round trip where the database takes
    several statements at once."""
    if _batched():
        cursor.execute("; ".join(statements), [p for ps in params for p in ps])
        rows = [_first(cursor)]
        for _ in statements[1:]:
            cursor.nextset()
            rows.append(_first(cursor))
        return rows
    rows = []
    for statement, ps in zip(statements, params, strict=True):
        cursor.execute(statement, ps)
        rows.append(cursor.fetchone())
    return rows


def _first(cursor):
    return cursor.fetchone() if cursor.description else None  # a SET returns no rows


@functools.cache
def _lock_clause() -> str:
    table = connection.ops.quote_name(Session._meta.db_table)
    return f" FOR UPDATE OF {table}" if connection.features.has_select_for_update_of else ""


def _column(model, name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


@functools.cache
def _sql(with_turn: bool, with_last: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    q = connection.ops.quote_name
    fields = tuple(f.attname for f in Session._meta.concrete_fields)
    table = q(Session._meta.db_table)
    cols = [f"{table}.{q(Session._meta.get_field(a).column)}" for a in fields]
    pk = f"{table}.{q(Session._meta.pk.column)}"
    if with_turn:
        turns, turn_pk = q(Turn._meta.db_table), q(Turn._meta.pk.column)
        cols += [f"(SELECT {_column(Turn, name)} FROM {turns} WHERE {turn_pk} = %s)"
                 for name in ("seq", "key")]
    statements = [f"SELECT {', '.join(cols)} FROM {table} WHERE {pk} = %s{_lock_clause()}"]
    if with_last:
        events, seq = q(TimelineEvent._meta.db_table), _column(TimelineEvent, "seq")
        statements.append(f"SELECT {seq} FROM {events} WHERE "
                          f"{_column(TimelineEvent, 'session')} = %s "
                          f"ORDER BY {seq} DESC LIMIT 1")
    return tuple(statements), fields


def locked(session_id: int, turn_id: int | None, with_last: bool,
           relaxed: bool = False) -> Session:
    """The session row locked (Session.DoesNotExist if none), as ``timeline._locked``
    returns it; with ``with_last`` also ``last_event_seq`` (0 before the first event).
    ``relaxed``: the transaction commits without waiting for its WAL flush (``SET LOCAL
    synchronous_commit``), sent in the same round trip as the lock: one trip fewer for
    each progress batch, which is what a turn's terminal batch queues behind."""
    statements, fields = _sql(turn_id is not None, with_last)
    with_turn = turn_id is not None
    params = [[turn_id, turn_id, session_id] if with_turn else [session_id]]
    if with_last:
        params.append([session_id])
    statements = list(statements)
    if relaxed and _batched():
        statements.insert(0, RELAXED)
        params.insert(0, [])
    with connection.cursor() as cursor:
        rows = _run(cursor, statements, params)
    if relaxed and _batched():
        rows.pop(0)  # the SET's (empty) result
    row = rows[0]
    if row is None:
        raise Session.DoesNotExist(f"no session {session_id}")
    last = rows[1] if with_last else None
    values = [v if v is None else _convert(i, v) for i, v in enumerate(row[:len(fields)])]
    session = Session.from_db(connection.alias, list(fields), values)
    if turn_id is not None:
        session.turn_seq, session.turn_key = row[len(fields):]
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
def _input_sql() -> tuple[str, str]:
    turns, events = (connection.ops.quote_name(m._meta.db_table) for m in (Turn, TimelineEvent))
    turn_seq, event_seq = _column(Turn, "seq"), _column(TimelineEvent, "seq")
    turn_session, event_session = _column(Turn, "session"), _column(TimelineEvent, "session")
    (lock,), _ = _sql(False, False)
    return lock, (
        f"SELECT (SELECT {turn_seq} FROM {turns} WHERE {turn_session} = %s "
        f"ORDER BY {turn_seq} DESC LIMIT 1), (SELECT {event_seq} FROM {events} WHERE "
        f"{event_session} = %s ORDER BY {event_seq} DESC LIMIT 1), "
        f"(SELECT {connection.ops.quote_name(Turn._meta.pk.column)} FROM {turns} "
        f"WHERE {turn_session} = %s AND {_column(Turn, 'key')} = %s)")


def locked_for_input(session_id: int, key: str | None
                     ) -> tuple[Session, int | None, int | None, int | None]:
    """For a new input: the session row locked, then (after the lock is held) its last
    turn seq, last event seq and the turn already queued with ``key``."""
    _, fields = _sql(False, False)
    with connection.cursor() as cursor:
        row, reads = _run(cursor, list(_input_sql()),
                          [[session_id], [session_id, session_id, session_id, key]])
    if row is None:
        raise Session.DoesNotExist(f"no session {session_id}")
    last_turn, last_event, existing = reads
    values = [v if v is None else _convert(i, v) for i, v in enumerate(row)]
    return (Session.from_db(connection.alias, list(fields), values), last_turn, last_event,
            existing)
