"""``bulk_create`` and ``save(update_fields=…)`` for the hot paths, each one statement whose
text is made once per model and field set.

A turn writes a handful of rows at its start and end (the input's turn and event, the turn
opened and ended, the session's state, each batch of events, the turn-ended effect). Built
by the ORM each statement cost about 1 ms of Python (compiling the query, the per-object
checks of ``bulk_create``) on the session host's database thread, which shares the
interpreter with the loop pumping the runtime. Here the fields' own
``pre_save``/``get_db_prep_save`` make the values, so defaults, ``auto_now``/``auto_now_add``
and JSON encoding are what the ORM would store, a database default (``db_default``) is
written as the ORM's own compiler writes it (``DEFAULT``, or its expression on SQLite), and
a field added to a model needs nothing here. No signals are sent (amux connects none).

One path on every database: the statements are standard SQL that PostgreSQL and SQLite
(3.35 or later: ``RETURNING``) both run, so the suite run on either covers them.

A transaction of these writes (``atomic``) is two round trips on PostgreSQL where the ORM's
would be four: its BEGIN goes with its first statements and its COMMIT with its last
(``send(..., last=True)``), instead of each in a round trip of its own (psycopg sends BEGIN
before the first statement of a transaction, and COMMIT when Django's block ends). On a
loaded machine a round trip costs milliseconds (each one waits for the server's process and
then for ours to be scheduled again), and a turn's start and end are each one transaction.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Model
from django.db.models.sql import InsertQuery
from psycopg.pq import TransactionStatus

RELAXED = "SET LOCAL synchronous_commit TO OFF"


class _Block:
    """What ``atomic`` tells ``send`` about the transaction it opened (PostgreSQL only)."""

    def __init__(self, owner: bool, relaxed: bool) -> None:
        self.owner = owner  # the outermost block: its BEGIN and COMMIT are ours to send
        self.first = True  # no statement of ours sent yet
        self.relaxed = relaxed
        self.committed = False


_BLOCK = "_fast_writes_block"  # the innermost ``atomic`` block, on the connection


@contextlib.contextmanager
def atomic(*, relaxed: bool = False, savepoint: bool = True) -> Iterator[None]:
    """``transaction.atomic()`` for a transaction made of ``send``'s statements. Outermost
    on PostgreSQL, its BEGIN rides with the first ``send`` and its COMMIT with the
    ``send(..., last=True)`` that ends it (nothing may write after that one: a statement
    that did would open a second transaction, which is refused at the block's end). Inside
    another transaction it is a part of that one (a savepoint unless ``savepoint`` is
    False), as ``transaction.atomic`` would make it. ``relaxed``: the transaction commits
    without waiting for its WAL flush (``synchronous_commit`` off for it alone): for what
    a crash of the database server may lose, never for what someone was told is stored."""
    db = connections[DEFAULT_DB_ALIAS]
    owner = not db.in_atomic_block
    with transaction.atomic(savepoint=savepoint):
        if db.vendor != "postgresql":
            yield
            return
        outer = getattr(db, _BLOCK, None)
        block = _Block(owner, relaxed)
        setattr(db, _BLOCK, block)
        try:
            yield
            if block.committed and _status(db) != TransactionStatus.IDLE:
                raise RuntimeError("a statement ran after the transaction's COMMIT was sent")
        finally:
            setattr(db, _BLOCK, outer)


def _status(db) -> TransactionStatus:
    return db.connection.pgconn.transaction_status


@functools.cache
def _statement(model: type[Model], unique: tuple[str, ...], update: tuple[str, ...]
               ) -> tuple[str, str, tuple]:
    meta = model._meta
    q = connection.ops.quote_name
    fields = tuple(f for f in meta.concrete_fields if not f.primary_key and not f.generated)
    head = f"INSERT INTO {q(meta.db_table)} ({', '.join(q(f.column) for f in fields)}) VALUES "
    tail = ""
    if unique:
        columns = [q(meta.get_field(name).column) for name in unique]
        sets = [f"{q(meta.get_field(n).column)} = EXCLUDED.{q(meta.get_field(n).column)}"
                for n in update]
        tail = f" ON CONFLICT({', '.join(columns)}) DO UPDATE SET {', '.join(sets)}"
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    return head, f"{tail} RETURNING {q(meta.pk.column)}", (row, fields)


def insert(objs: Sequence[Model], *, unique_fields: Sequence[str] = (),
           update_fields: Sequence[str] = ()) -> None:
    """Insert ``objs`` (new instances of one model) in the caller's transaction; each gets
    its id, as ``bulk_create`` gives it. With ``unique_fields`` a conflicting row is
    updated in place (``update_fields``) and the object gets that row's id."""
    if objs:
        send([insert_statement(objs, unique_fields=unique_fields,
                               update_fields=update_fields)])


class Statement(NamedTuple):
    """One write made ready: its SQL, its parameters, and what takes its result (the rows it
    returned, or None when it returns none, and its rowcount)."""

    sql: str
    params: list
    done: Callable[[list | None, int], Any]


def send(statements: Sequence[Statement], *, last: bool = False) -> list:
    """Run ``statements`` in order in the caller's transaction, in one round trip where the
    database takes several statements at once (PostgreSQL's simple query: Django's psycopg
    cursor binds parameters on the client), else one after the other; each ``done``'s
    answer, in order. In an ``atomic`` block on PostgreSQL the block's BEGIN (and its
    relaxed commit) go with its first statements, and with ``last`` its COMMIT with these."""
    db = connections[DEFAULT_DB_ALIAS]
    out = []
    with db.cursor() as cursor:
        block = getattr(db, _BLOCK, None) if db.vendor == "postgresql" else None
        head, tail = _around(db, block, last) if block is not None else ([], [])
        if head or tail or (len(statements) > 1 and db.vendor == "postgresql"):
            cursor.execute("; ".join([*head, *(s.sql for s in statements), *tail]),
                           [p for s in statements for p in s.params])
            for _ in head:
                cursor.nextset()
            for i, statement in enumerate(statements):
                if i:
                    cursor.nextset()
                rows = cursor.fetchall() if cursor.description else None
                out.append(statement.done(rows, cursor.rowcount))
            if tail:
                block.committed = True
                # psycopg opens the next transaction itself again (and Django's COMMIT at
                # the block's end finds nothing to commit: no round trip)
                db.connection.autocommit = False
            return out
        for statement in statements:
            cursor.execute(statement.sql, statement.params)
            rows = cursor.fetchall() if cursor.description else None
            out.append(statement.done(rows, cursor.rowcount))
    return out


def _around(db, block: _Block, last: bool) -> tuple[list[str], list[str]]:
    """The statements sent before and after a ``send``'s own in an ``atomic`` block."""
    head: list[str] = []
    if block.first:
        block.first = False
        raw = db.connection
        if block.owner and _status(db) == TransactionStatus.IDLE \
                and raw.isolation_level is None and raw.read_only is None:
            # psycopg would send BEGIN in a round trip of its own before these: it is sent
            # with them instead (psycopg, told autocommit, adds none; Django's block still
            # commits or rolls back what the server holds open)
            raw.autocommit = True
            head.append("BEGIN")
        if block.relaxed:
            head.append(RELAXED)
    tail = ["COMMIT"] if last and block.owner and not block.committed else []
    return head, tail


def insert_statement(objs: Sequence[Model], *, unique_fields: Sequence[str] = (),
                     update_fields: Sequence[str] = ()) -> Statement:
    """``insert``'s statement, to ``send`` with others; the objects get their ids when it
    has run."""
    model = type(objs[0])
    head, tail, (row, fields) = _statement(model, tuple(unique_fields), tuple(update_fields))
    db = connections[DEFAULT_DB_ALIAS]  # once: each use of the proxy is a context lookup
    params: list = []
    rows: list[str] = []
    for obj in objs:
        values = [f.pre_save(obj, True) for f in fields]
        if any(hasattr(v, "as_sql") for v in values):  # a db_default the database fills
            rows.append(_row_with_expressions(db, model, fields, values, params))
            continue
        params += [f.get_db_prep_save(v, db) for f, v in zip(fields, values, strict=True)]
        rows.append(row)

    def done(ids: list | None, _count: int) -> None:
        for obj, (pk,) in zip(objs, ids or [], strict=True):
            obj.pk = pk
            obj._state.adding = False
            obj._state.db = db.alias

    return Statement(head + ", ".join(rows) + tail, params, done)


def _row_with_expressions(db, model: type[Model], fields: tuple, values: list,
                          params: list) -> str:
    """One row's placeholders where some values are expressions (a ``DatabaseDefault``),
    compiled as the ORM's INSERT compiles them; their parameters appended to ``params``."""
    query = InsertQuery(model)
    compiler = query.get_compiler(connection=db)
    parts = []
    for field, value in zip(fields, values, strict=True):
        if hasattr(value, "as_sql"):
            sql, more = compiler.compile(value.resolve_expression(query, for_save=True))
            parts.append(sql)
            params += more
        else:
            parts.append("%s")
            params.append(field.get_db_prep_save(value, db))
    return "(" + ", ".join(parts) + ")"


@functools.cache
def _update_sql(model: type[Model], names: tuple[str, ...], guard: str | None, negate: bool,
                values: int) -> tuple[str, tuple]:
    meta = model._meta
    q = connection.ops.quote_name
    fields = tuple(meta.get_field(name) for name in names)
    sql = (f"UPDATE {q(meta.db_table)} SET {', '.join(f'{q(f.column)} = %s' for f in fields)}"
           f" WHERE {q(meta.pk.column)} = %s")
    if guard:
        listed = ", ".join(["%s"] * values)
        sql += f" AND {q(meta.get_field(guard).column)} {'NOT ' if negate else ''}IN ({listed})"
    return sql, fields


def update(obj: Model, fields: Sequence[str], *,
           only_if: tuple[str, Iterable] | None = None,
           unless: tuple[str, Iterable] | None = None,
           returning: Sequence[str] = ()) -> Any:
    """``obj.save(update_fields=fields)`` (``auto_now`` fields take the time now), and only
    while the row's ``only_if`` field holds one of the values (``unless``: none of them);
    True when the row was updated. With ``returning``: the updated row's values of those
    fields (as the ORM reads them), or None when it was not updated — what the caller
    would otherwise read back after the write."""
    return send([update_statement(obj, fields, only_if=only_if, unless=unless,
                                  returning=returning)])[0]


def update_statement(obj: Model, fields: Sequence[str], *,
                     only_if: tuple[str, Iterable] | None = None,
                     unless: tuple[str, Iterable] | None = None,
                     returning: Sequence[str] = ()) -> Statement:
    """``update``'s statement, to ``send`` with others."""
    guard, negate = (only_if, False) if only_if else (unless, True) if unless else (None, False)
    listed = [str(v) for v in guard[1]] if guard else []
    if guard and not listed:
        raise ValueError("a guard needs at least one value")
    sql, prepared = _update_sql(type(obj), tuple(fields), guard[0] if guard else None, negate,
                                len(listed))
    db = connections[DEFAULT_DB_ALIAS]
    params = [f.get_db_prep_save(f.pre_save(obj, False), db) for f in prepared]
    params.append(obj.pk)
    params += listed
    if not returning:
        return Statement(sql, params, lambda _rows, count: count > 0)
    back, converters = _returning(type(obj), tuple(returning))

    def done(rows: list | None, _count: int) -> tuple | None:
        if not rows:
            return None
        return tuple(_converted(v, convert) for v, convert in zip(rows[0], converters,
                                                                   strict=True))

    return Statement(sql + back, params, done)


@functools.cache
def _returning(model: type[Model], names: tuple[str, ...]) -> tuple[str, list]:
    meta = model._meta
    q = connection.ops.quote_name
    fields = [meta.get_field(name) for name in names]
    converters = []
    for field in fields:
        col = field.get_col(meta.db_table)
        converters.append([(c, col) for c in [*connection.ops.get_db_converters(col),
                                              *field.get_db_converters(connection)]])
    return f" RETURNING {', '.join(q(f.column) for f in fields)}", converters


def _converted(value: Any, converters: list) -> Any:
    if value is None:
        return None
    for convert, expression in converters:
        value = convert(value, expression, connection)
    return value
