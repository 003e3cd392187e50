"""The kept database's files: a SQLite text dump (sqlite3's iterdump, so it diffs and
stays small), a plain `pg_dump`, and what each database holds (its applied migrations and
every table's row count), read the same way from either. Also how a dump is loaded into a
fresh database again (the upgrade test, tests/integration/test_upgrade_from_kept_db.py)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SQLITE_DUMP = "amux.sqlite3.sql"
PG_DUMP = "amux.pg.sql"
MANIFEST = "manifest.json"


def sqlite_dump(database: Path, out: Path) -> None:
    db = sqlite3.connect(database)
    try:
        out.write_text("\n".join(db.iterdump()) + "\n", encoding="utf-8")
    finally:
        db.close()


def sqlite_load(dump: Path, database: Path) -> None:
    db = sqlite3.connect(database)
    try:
        db.executescript(dump.read_text(encoding="utf-8"))
    finally:
        db.close()


def sqlite_contents(database: Path) -> tuple[list[str], dict[str, int]]:
    db = sqlite3.connect(database)
    try:
        tables = [t for (t,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return _contents(db.cursor(), tables)
    finally:
        db.close()


def _contents(cursor, tables: list[str]) -> tuple[list[str], dict[str, int]]:
    counts = {}
    for table in tables:
        cursor.execute(f'SELECT COUNT(*) FROM "{table}"')  # noqa: S608 (a table's name)
        counts[table] = cursor.fetchone()[0]
    cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
    return [f"{app}.{name}" for app, name in cursor.fetchall()], counts


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _pg_env(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    env = {**os.environ, "PGHOST": parts.hostname or "127.0.0.1",
           "PGPORT": str(parts.port or 5432), "PGUSER": parts.username or "postgres"}
    if parts.password:
        env["PGPASSWORD"] = parts.password
    return env


@contextmanager
def scratch_postgres(server_url: str, prefix: str):
    """A new database on the server of ``server_url`` (any of its databases), dropped after;
    yields its URL."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_dump(url: str, out: Path) -> None:
    parts = urlsplit(url)
    done = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "--file", str(out),
                           parts.path.lstrip("/")], env=_pg_env(url), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"pg_dump exited {done.returncode}: {done.stderr.strip()}")


def pg_load(dump: Path, url: str) -> None:
    """A plain dump holds COPY blocks, which only psql reads (as `amux restore` does)."""
    parts = urlsplit(url)
    done = subprocess.run(["psql", "--no-psqlrc", "--quiet", "--single-transaction",
                           "--set=ON_ERROR_STOP=1", "--file", str(dump),
                           "--dbname", parts.path.lstrip("/")], env=_pg_env(url),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"psql exited {done.returncode}: {done.stderr.strip()}")


def pg_contents(url: str) -> tuple[list[str], dict[str, int]]:
    import psycopg

    with psycopg.connect(url) as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                       "ORDER BY tablename")
        return _contents(cursor, [t for (t,) in cursor.fetchall()])
