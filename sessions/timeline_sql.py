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
query (one round trip, with the transaction's BEGIN and the writes that need the lock held:
the last seq is read by the second statement, after the lock is held, in a snapshot of its
own under READ COMMITTED, so it sees what the previous holder of the lock committed);
SQLite, in process, one after the other (``fast_writes.send``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django.db import connection

from amux_common import fast_writes
from sessions.models import Session, TimelineEvent, Turn


def _first_row(rows: list | None, _count: int):
    return rows[0] if rows else None


def _reads(statements: Sequence[str], params: list[list]) -> list[fast_writes.Statement]:
    return [fast_writes.Statement(sql, ps, _first_row)
            for sql, ps in zip(statements, params, strict=True)]


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
           then: Sequence[fast_writes.Statement] = ()) -> tuple[Session, list]:
    """The session row locked (Session.DoesNotExist if none), as ``timeline._locked``
    returns it; with ``with_last`` also ``last_event_seq`` (0 before the first event).
    ``then``: writes that need the lock held, sent in the same round trip after it; their
    answers (``fast_writes.Statement.done``) come back beside the session. In a
    ``fast_writes.atomic`` block the block's BEGIN (and relaxed commit) ride along too."""
    statements, fields = _sql(turn_id is not None, with_last)
    with_turn = turn_id is not None
    params = [[turn_id, turn_id, session_id] if with_turn else [session_id]]
    if with_last:
        params.append([session_id])
    answers = fast_writes.send([*_reads(statements, params), *then])
    row = answers[0]
    if row is None:
        raise Session.DoesNotExist(f"no session {session_id}")
    last = answers[1] if with_last else None
    values = [v if v is None else _convert(i, v) for i, v in enumerate(row[:len(fields)])]
    session = Session.from_db(connection.alias, list(fields), values)
    if turn_id is not None:
        session.turn_seq, session.turn_key = row[len(fields):]
    if with_last:
        session.last_event_seq = last[0] if last else 0
    return session, answers[len(statements):]


def _convert(index: int, value, model=Session):
    for convert, expression in _converters(model)[index]:
        value = convert(value, expression, connection)
    return value


@functools.cache
def _converters(model) -> list[list]:
    """Per column, what the ORM applies to a value read (e.g. JSON text to a dict)."""
    out = []
    for field in model._meta.concrete_fields:
        col = field.get_col(model._meta.db_table)
        out.append([(c, col) for c in [*connection.ops.get_db_converters(col),
                                       *field.get_db_converters(connection)]])
    return out


@functools.cache
def _next_queued_sql() -> str:
    table = connection.ops.quote_name(Turn._meta.db_table)
    cols = ", ".join(connection.ops.quote_name(f.column) for f in Turn._meta.concrete_fields)
    return (f"SELECT {cols} FROM {table} WHERE {_column(Turn, 'session')} = %s AND "
            f"{_column(Turn, 'state')} = %s ORDER BY {_column(Turn, 'seq')} LIMIT 1")


def next_queued_turn(session_id: int, queued: str) -> Turn | None:
    """The session's first turn in state ``queued``: what its host serves next, read at
    every look the host takes (a queryset compiled each time cost about 1 ms of Python on
    the way from a new input to the runtime)."""
    with connection.cursor() as cursor:
        cursor.execute(_next_queued_sql(), [session_id, queued])
        row = cursor.fetchone()
    if row is None:
        return None
    values = [v if v is None else _convert(i, v, Turn) for i, v in enumerate(row)]
    return Turn.from_db(connection.alias, [f.attname for f in Turn._meta.concrete_fields],
                        values)


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
    row, reads = fast_writes.send(_reads(_input_sql(), [[session_id],
                                                         [session_id, session_id, session_id,
                                                          key]]))
    if row is None:
        raise Session.DoesNotExist(f"no session {session_id}")
    last_turn, last_event, existing = reads
    values = [v if v is None else _convert(i, v) for i, v in enumerate(row)]
    return (Session.from_db(connection.alias, list(fields), values), last_turn, last_event,
            existing)


@functools.cache
def _provenance_sql() -> str:
    events = connection.ops.quote_name(TimelineEvent._meta.db_table)
    return (f"UPDATE {events} SET {_column(TimelineEvent, 'provenance')} = %s WHERE "
            f"{_column(TimelineEvent, 'turn')} = %s AND {_column(TimelineEvent, 'type')} = %s")


def provenance_statement(turn_id: int, type_: str, provenance: dict) -> fast_writes.Statement:
    """The provenance of a turn's events of ``type_`` replaced, as a write to send with a
    batch's own (``fast_writes.send``)."""
    field = TimelineEvent._meta.get_field("provenance")
    return fast_writes.Statement(_provenance_sql(), [
        field.get_db_prep_save(provenance, connection), turn_id, type_],
        lambda _rows, count: count)
