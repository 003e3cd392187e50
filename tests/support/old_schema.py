"""A test that runs against the schema of an earlier migration: the database migrated back
to it, the apps as they were then, and migrated forward to the latest after, whatever
happened (a test never leaves the worker's database old)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def migrate_to_latest() -> None:
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@contextlib.contextmanager
def old_schema_at(targets: list[tuple[str, str | None]]) -> Iterator[Apps]:
    """The apps as of ``targets`` (whose first is the migration that names the state)."""
    executor = migrate(targets)
    try:
        yield executor.loader.project_state(targets[0]).apps
    finally:
        migrate_to_latest()
