"""Which constraint an IntegrityError broke, by the constraint's name (never by reading
the message for a table or column name at the call site).

PostgreSQL names the constraint (psycopg's `diag.constraint_name`). SQLite names only the
columns of a unique constraint (`UNIQUE constraint failed: table.a, table.b`) and the name
of a check constraint; the columns are matched against the named constraint's, found in
the installed models (a named UniqueConstraint, or a unique field under PostgreSQL's
default name `<table>_<column>_key`).
"""

from __future__ import annotations

import re

from django.apps import apps
from django.db import IntegrityError
from django.db.models import UniqueConstraint


def violates(exc: IntegrityError, constraint: str) -> bool:
    diag = getattr(exc.__cause__, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name:
        return name == constraint
    message = str(exc)
    check = re.match(r"CHECK constraint failed: (\S+)", message)
    if check:
        return check.group(1) == constraint
    unique = re.match(r"UNIQUE constraint failed: (.+)$", message)
    if not unique:
        return False
    failed = {column.strip() for column in unique.group(1).split(",")}
    return failed == _unique_columns(constraint)


def _unique_columns(constraint: str) -> set[str] | None:
    for model in apps.get_models():
        meta = model._meta
        for rule in meta.constraints:
            if rule.name == constraint and isinstance(rule, UniqueConstraint) and rule.fields:
                return {f"{meta.db_table}.{meta.get_field(f).column}" for f in rule.fields}
        for field in meta.local_fields:
            if field.unique and not field.primary_key \
                    and f"{meta.db_table}_{field.column}_key" == constraint:
                return {f"{meta.db_table}.{field.column}"}
    return None
