"""The webhook's one statement: store a verified delivery only while its source row still
holds exactly what the delivery was verified against, so the check and the write are one
round trip with nothing to race. The delivery's source column is the row's id as the
check reads it (INSERT … VALUES ((SELECT id FROM source WHERE id = … AND … ), …)): a row
that no longer matches gives NULL, which the column refuses, and nothing is stored. On
PostgreSQL this costs the server less than INSERT … SELECT … WHERE EXISTS, which it plans
as a join for every delivery (bench/ingest.py).

One statement for every database, made from the models: its columns, each value prepared
by its own field (so its type is the field's: JSON as JSON, the body as bytes), every
column the webhook does not give stored at its field's default, and a column with only a
database default (``db_default``) left to the database, as the ORM leaves it. A field
added to `Delivery` is stored as the ORM would store it, with nothing to edit here. On
PostgreSQL it goes out with its parameters bound on the server: the raw body travels as
binary bytea instead of being escaped into the query text (twice its size in hex, built on
every request), and the defaults are prepared once. With no model instance made either,
this halved what a signed delivery costs the web process beyond a bare one-INSERT request
(about 1.1 ms → 0.55 ms of CPU per request, bench/ingest.py on 2 cores).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import weakref

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import NOT_PROVIDED, Field

from amux_common.clock import now as clock
from intake.models import Delivery, Source

# What a webhook gives a new delivery (the source first: its value is the check's); every
# other column is stored at its default.
GIVEN = ("source", "delivery_id", "event", "mailbox", "headers", "body", "received_at")
# What a delivery was verified against: the source row must still hold these.
CHECKED = ("kind", "slug", "config", "secrets")


@dataclasses.dataclass(frozen=True)
class SourceSeen:
    """The columns of a source row a delivery was verified against, as stored: a delivery
    stored with it is stored only while the row still holds exactly these."""

    id: int
    kind: str
    slug: str
    config: dict
    secrets_stored: str  # the encrypted column's text, compared as it is

    @functools.cached_property
    def checked(self) -> list:
        """The check's parameters, each prepared by its field once per row seen (the
        secrets as their stored text)."""
        field = Source._meta.get_field
        return [self.id, *(field(name).get_db_prep_save(value, connection) for name, value
                           in (("kind", self.kind), ("slug", self.slug),
                               ("config", self.config))), self.secrets_stored]


def inserted(*, source_id: int, delivery_id: str, event: str, mailbox: str, headers: dict,
             body: bytes, seen: SourceSeen) -> int | None:
    """The new delivery's id, or None when the source row is no longer `seen` (nothing
    stored). A delivery id stored before raises the database's IntegrityError."""
    if source_id != seen.id:
        raise ValueError(f"source {source_id} was not the row seen ({seen.id})")
    db = connections[DEFAULT_DB_ALIAS]  # once: each use of the proxy is a context lookup
    sql, given, rest = _statement(db.vendor)
    # the source column's value is the check's (seen.checked leads with the id)
    values = (delivery_id, event, mailbox, headers, body, clock())
    params = list(seen.checked)
    params += [f.get_db_prep_save(v, db) for f, v in zip(given[1:], values, strict=True)]
    params += [prep(db) if callable(prep) else prep for prep in _defaults(rest)]
    # In a caller's transaction a savepoint keeps the refusal from breaking it (autocommit,
    # the webhook's way, needs none: the statement is its own transaction).
    guard = transaction.atomic() if db.in_atomic_block else contextlib.nullcontext()
    try:
        with guard:
            if db.vendor == "postgresql":
                return _bound_on_server(db, sql, params)
            with db.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchone()[0]
    except IntegrityError as exc:
        if _source_unmatched(exc):
            return None
        raise


def _source_unmatched(exc: IntegrityError) -> bool:
    """Whether the source column was refused NULL: the check found no row as seen."""
    meta = Delivery._meta
    column = meta.get_field("source").column
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    if diag is not None:  # psycopg (PostgreSQL): the not_null_violation and its column
        return (diag.sqlstate == "23502" and diag.table_name == meta.db_table
                and diag.column_name == column)
    return str(cause if cause is not None else exc).strip() == (
        f"NOT NULL constraint failed: {meta.db_table}.{column}")


def _left_to_database(field: Field) -> bool:
    """A column with a database default and no Python one: the ORM leaves it out of an
    INSERT (or writes DEFAULT), and so does this statement."""
    return field.db_default is not NOT_PROVIDED and not field.has_default()


@functools.cache
def _statement(vendor: str) -> tuple[str, tuple[Field, ...], tuple[Field, ...]]:
    """The statement, made from the models once per database: the source column as the
    check finds it, the other given columns, then every other column at its field's
    default. Answers the statement, the given fields (the source first) and the
    defaulted ones."""
    meta, q = Delivery._meta, connection.ops.quote_name
    given = tuple(meta.get_field(name) for name in GIVEN)
    rest = tuple(f for f in meta.concrete_fields if not f.primary_key and not f.generated
                 and f not in given and not _left_to_database(f))
    columns = ", ".join(q(f.column) for f in (*given, *rest))
    source = Source._meta
    matches = " AND ".join(f"{q(source.get_field(name).column)} = %s" for name in CHECKED)
    check = (f"(SELECT {q(source.pk.column)} FROM {q(source.db_table)} WHERE "
             f"{q(source.pk.column)} = %s AND {q(source.get_field('enabled').column)} AND "
             f"{matches})")
    values = ", ".join([check, *["%s"] * (len(given) - 1 + len(rest))])
    return (f"INSERT INTO {q(meta.db_table)} ({columns}) VALUES ({values})"
            f" RETURNING {q(meta.pk.column)}"), given, rest


@functools.cache
def _defaults(rest: tuple[Field, ...]) -> tuple:
    """Each remaining column's value as the database takes it: prepared once for a constant
    default, a function called per delivery for a callable one (a time, a new token)."""
    def prepared(field: Field):
        if field.has_default() and callable(field.default):
            return lambda db: field.get_db_prep_save(field.get_default(), db)
        return field.get_db_prep_save(field.get_default(), connection)

    return tuple(prepared(f) for f in rest)


# The cursor this statement goes out on, kept per (pooled) connection: a new psycopg cursor
# looks up and makes a dumper for each parameter's type again, about 0.14 ms of CPU per
# delivery for this statement's parameters (a third of what the web process spent beyond
# the floor's HMAC, JSON parse and INSERT, bench/ingest.py). A connection serves one
# request at a time.
_cursors: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bound_on_server(db, sql: str, params: list) -> int | None:
    import psycopg

    db.ensure_connection()
    raw = _cursors.get(db.connection)
    if raw is None or raw.closed:
        # bound on the server, unlike Django's own
        raw = _cursors[db.connection] = psycopg.Cursor(db.connection)
    # wrapped as Django wraps its cursors (execute wrappers, query logging, its exceptions),
    # not closed after: the next delivery on this connection takes it again
    wrap = db.make_debug_cursor if db.queries_logged else db.make_cursor
    cursor = wrap(raw)
    cursor.execute(sql, params)
    row = cursor.fetchone()
    return None if row is None else row[0]
