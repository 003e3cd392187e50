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
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model
from django.db.models.sql import InsertQuery


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


def send(statements: Sequence[Statement]) -> list:
    """Run ``statements`` in order in the caller's transaction, in one round trip where the
    database takes several statements at once (PostgreSQL's simple query: Django's psycopg
    cursor binds parameters on the client), else one after the other; each ``done``'s
    answer, in order."""
    db = connections[DEFAULT_DB_ALIAS]
    out = []
    with db.cursor() as cursor:
        if len(statements) > 1 and db.vendor == "postgresql":
            cursor.execute("; ".join(s.sql for s in statements),
                           [p for s in statements for p in s.params])
            for i, statement in enumerate(statements):
                if i:
                    cursor.nextset()
                rows = cursor.fetchall() if cursor.description else None
                out.append(statement.done(rows, cursor.rowcount))
            return out
        for statement in statements:
            cursor.execute(statement.sql, statement.params)
            rows = cursor.fetchall() if cursor.description else None
            out.append(statement.done(rows, cursor.rowcount))
    return out


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
