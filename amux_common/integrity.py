"""Which constraint an IntegrityError broke, by the constraint's name (never by matching
the message's prose), on PostgreSQL and SQLite.

PostgreSQL names the constraint in the error (`diag.constraint_name`). SQLite names only a
CHECK constraint; for a unique one it lists the table's columns ("UNIQUE constraint failed:
t.a, t.b"), so the name is looked up among the models' `Meta.constraints` and compared by
table and columns. Name every constraint you want to tell apart in its model's Meta; a
field's `unique=True` is found under PostgreSQL's default name `<table>_<column>_key`.
"""

from __future__ import annotations

import re

from django.apps import apps
from django.db import IntegrityError, models

_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (.+)$")
_SQLITE_CHECK = re.compile(r"CHECK constraint failed: (\S+)")
_SQLITE_INDEX = re.compile(r"index '([^']+)'")


def violates(exc: IntegrityError, constraint: str) -> bool:
    """True when `exc` was raised by the database for the constraint named `constraint`."""
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    if diag is not None:  # psycopg (PostgreSQL)
        return getattr(diag, "constraint_name", None) == constraint
    message = str(cause if cause is not None else exc).strip()
    if check := _SQLITE_CHECK.search(message):
        return check.group(1) == constraint
    if not (unique := _SQLITE_UNIQUE.search(message)):
        return False
    failed = unique.group(1).strip()
    if index := _SQLITE_INDEX.fullmatch(failed):  # a unique index on expressions
        return index.group(1) == constraint
    spots = [part.strip().rpartition(".") for part in failed.split(",")]
    tables = {table for table, _, _ in spots}
    columns = [column for _, _, column in spots]
    return len(tables) == 1 and _unique_columns(constraint) == (tables.pop(), columns)


def _unique_columns(name: str) -> tuple[str, list[str]] | None:
    """(table, columns) of the model unique constraint called `name`, else None."""
    for model in apps.get_models():
        meta = model._meta
        for constraint in meta.constraints:
            if isinstance(constraint, models.UniqueConstraint) and constraint.name == name:
                columns = [meta.get_field(field).column for field in constraint.fields]
                return meta.db_table, columns
        for field in meta.local_fields:  # `unique=True`, under PostgreSQL's default name
            if field.unique and not field.primary_key \
                    and f"{meta.db_table}_{field.column}_key" == name:
                return meta.db_table, [field.column]
    return None
