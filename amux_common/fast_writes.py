"""``bulk_create`` and ``save(update_fields=…)`` for the hot paths, each one statement whose
text is made once per model and field set.

A turn writes a handful of rows at its start and end (the input's turn and event, the turn
opened and ended, the session's state, each batch of events, the turn-ended effect). Built
by the ORM each statement cost about 1 ms of Python (compiling the query, the per-object
checks of ``bulk_create``) on the session host's database thread, which shares the
interpreter with the loop pumping the runtime. Here the fields' own
``pre_save``/``get_db_prep_save`` make the values, so defaults, ``auto_now``/``auto_now_add``
and JSON encoding are what the ORM would store. No signals are sent (amux connects none).

PostgreSQL only; elsewhere (SQLite) the ORM does it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from django.db import connection
from django.db.models import Model


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
    if not objs:
        return
    model = type(objs[0])
    if connection.vendor != "postgresql":
        extra = ({"update_conflicts": True, "unique_fields": list(unique_fields),
                  "update_fields": list(update_fields)} if unique_fields else {})
        model.objects.bulk_create(list(objs), **extra)
        return
    head, tail, (row, fields) = _statement(model, tuple(unique_fields), tuple(update_fields))
    params: list = []
    for obj in objs:
        params += [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(head + ", ".join([row] * len(objs)) + tail, params)
        ids = cursor.fetchall()
    for obj, (pk,) in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = connection.alias


@functools.cache
def _update_sql(model: type[Model], names: tuple[str, ...], guard: str | None, negate: bool
                ) -> tuple[str, tuple]:
    meta = model._meta
    q = connection.ops.quote_name
    fields = tuple(meta.get_field(name) for name in names)
    sql = (f"UPDATE {q(meta.db_table)} SET {', '.join(f'{q(f.column)} = %s' for f in fields)}"
           f" WHERE {q(meta.pk.column)} = %s")
    if guard:
        sql += f" AND {'NOT ' if negate else ''}{q(meta.get_field(guard).column)} = ANY(%s)"
    return sql, fields


def update(obj: Model, fields: Sequence[str], *,
           only_if: tuple[str, Iterable] | None = None,
           unless: tuple[str, Iterable] | None = None) -> bool:
    """``obj.save(update_fields=fields)`` (``auto_now`` fields take the time now), and only
    while the row's ``only_if`` field holds one of the values (``unless``: none of them);
    True when the row was updated."""
    guard, negate = (only_if, False) if only_if else (unless, True) if unless else (None, False)
    if connection.vendor != "postgresql":
        rows = type(obj)._base_manager.filter(pk=obj.pk)
        if guard:
            lookup = {f"{guard[0]}__in": list(guard[1])}
            rows = rows.exclude(**lookup) if negate else rows.filter(**lookup)
        meta = type(obj)._meta
        values = {meta.get_field(name).attname: meta.get_field(name).pre_save(obj, False)
                  for name in fields}
        return bool(rows.update(**values))
    sql, prepared = _update_sql(type(obj), tuple(fields), guard[0] if guard else None, negate)
    params = [f.get_db_prep_save(f.pre_save(obj, False), connection) for f in prepared]
    params.append(obj.pk)
    if guard:
        params.append([str(v) for v in guard[1]])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount > 0
