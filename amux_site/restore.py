"""`amux restore FILE`: a backup `amux backup` wrote put back as this installation's
database, with amux stopped.

Before anything changes, the file is checked: its kind must be this installation's
database (a `.sqlite3` copy for SQLite, a `pg_dump` archive for PostgreSQL), and every
migration its database had applied must be known to this amux (a backup from a newer amux
is refused: this code cannot run its schema). Then the database as it is now is kept as a
backup of its own, and the file replaces it whole — SQLite: the copy is written beside the
database file and moved over it, PostgreSQL: the schema is dropped and the archive loaded
in one transaction (a failure changes nothing). An older backup is migrated to this amux's
schema. The secrets in it were encrypted with the secret key of the installation that made
it: when this one's cannot read them, restore says what to copy.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from amux_common.secrets import EncryptedJSONField, decrypt
from amux_site import backup
from amux_site.version import version

SQLITE_MAGIC = b"SQLite format 3\x00"
PG_MAGIC = b"PGDMP"
LABEL = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


class RestoreError(RuntimeError):
    """The backup cannot be restored here; nothing was changed."""


def restore(file: str | os.PathLike, say: Callable[[str], None]) -> None:
    path = Path(file).expanduser().resolve()
    kind = _kind(path)
    if kind != connection.vendor:
        raise RestoreError(
            f"{path.name} is a {LABEL[kind]} backup and this installation's database is "
            f"{LABEL.get(connection.vendor, connection.vendor)}")
    applied = _sqlite_applied(path) if kind == "sqlite" else _postgres_applied(path)
    if not applied:
        raise RestoreError(f"{path.name} holds no amux database (no applied migrations)")
    unknown = sorted(f"{app}.{name}" for app, name in applied - known_migrations())
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise RestoreError(
            f"{path.name} was made by a newer amux: its database has migrations amux "
            f"{version()} does not know ({', '.join(unknown[:3])}{more}); restore it with "
            "the amux that made it, or a later one")
    kept = _keep_current()
    if kept:
        say(f"amux: the database as it was is kept in {kept}")
    connection.close()
    if kind == "sqlite":
        _restore_sqlite(path, Path(connection.settings_dict["NAME"]))
    else:
        _restore_postgres(path, connection.settings_dict)
    say(f"amux: restored {path}")
    call_command("migrate", interactive=False, verbosity=0)
    say(f"amux: database at amux {version()}'s schema; `make run` starts it")
    unreadable = undecryptable_secrets()
    if unreadable:
        say(f"amux: warning: {unreadable} stored secret(s) (provider keys, source secrets) "
            "were encrypted with another secret key: copy the secret_key file of the "
            "installation that made the backup into this data directory (or set "
            "AMUX_SECRET_KEY to its value) before starting amux")


def _kind(path: Path) -> str:
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        raise RestoreError(f"no file at {path}") from None
    except OSError as exc:
        raise RestoreError(f"cannot read {path}: {exc.strerror}") from None
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(PG_MAGIC):
        return "postgresql"
    raise RestoreError(f"{path.name} is not a backup `amux backup` wrote (neither a SQLite "
                       "database nor a pg_dump archive)")


def known_migrations() -> set[tuple[str, str]]:
    """Every (app, migration) this amux's code holds (the upgrade test of the kept
    databases asks the same of theirs)."""
    return set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)


def _sqlite_applied(path: Path) -> set[tuple[str, str]]:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if db.execute("PRAGMA quick_check").fetchone() != ("ok",):
                raise RestoreError(f"{path.name} is a damaged SQLite database")
            return set(db.execute("SELECT app, name FROM django_migrations"))
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise RestoreError(f"{path.name} cannot be read as an amux database: {exc}") from None


def _pg_env(db: dict) -> dict[str, str]:
    env = {**os.environ}
    for key, var in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER"),
                     ("PASSWORD", "PGPASSWORD")):
        if db.get(key):
            env[var] = str(db[key])
    return env


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RestoreError(f"{name} not found (install the PostgreSQL client tools)")
    return found


def _run(argv: list[str], env: dict[str, str] | None = None,
         stdin: str | None = None) -> str:
    done = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        raise RestoreError(f"{Path(argv[0]).name} exited {done.returncode}: {why}")
    return done.stdout


def _postgres_applied(path: Path) -> set[tuple[str, str]]:
    """The django_migrations rows of the archive (its COPY data, read by pg_restore)."""
    text = _run([_tool("pg_restore"), "--data-only", "--table=django_migrations",
                 "--file=-", str(path)])
    rows, inside = set(), False
    for line in text.splitlines():
        if line.startswith("COPY ") and "django_migrations" in line:
            inside = True
        elif inside and line == "\\.":
            inside = False
        elif inside:
            fields = line.split("\t")
            if len(fields) >= 3:
                rows.add((fields[1], fields[2]))
    return rows


def _keep_current() -> Path | None:
    """The database as it is now, as a backup of its own (None: there is none yet)."""
    if connection.vendor == "sqlite" and not Path(connection.settings_dict["NAME"]).exists():
        return None
    if not connection.introspection.table_names():
        return None
    try:
        return backup.backup(None)
    except backup.BackupError as exc:
        raise RestoreError(f"the database as it is could not be kept first: {exc}") from None


def _restore_sqlite(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(target.name + ".restoring")
    staged.unlink(missing_ok=True)
    os.close(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            out = sqlite3.connect(staged)
            try:
                src.backup(out)
                out.execute("PRAGMA journal_mode=WAL")
            finally:
                out.close()
        finally:
            src.close()
    except sqlite3.Error as exc:
        staged.unlink(missing_ok=True)
        raise RestoreError(f"the copy could not be written: {exc}") from None
    # the old database's write-ahead log must not be replayed onto the restored one
    for suffix in ("-wal", "-shm"):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    os.replace(staged, target)


def _restore_postgres(source: Path, db: dict) -> None:
    script = _run([_tool("pg_restore"), "--no-owner", "--no-privileges", "--file=-",
                   str(source)])
    _run([_tool("psql"), "--no-psqlrc", "--quiet", "--single-transaction",
          "--set=ON_ERROR_STOP=1", "--dbname", str(db["NAME"])], env=_pg_env(db),
         stdin="DROP SCHEMA public CASCADE;\nCREATE SCHEMA public;\n" + script)


def undecryptable_secrets() -> int:
    """How many stored secrets this installation's key cannot decrypt."""
    count = 0
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if not isinstance(field, EncryptedJSONField):
                continue
            table, column = (connection.ops.quote_name(model._meta.db_table),
                             connection.ops.quote_name(field.column))
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {column} FROM {table} "  # noqa: S608 (names)
                               f"WHERE {column} IS NOT NULL AND {column} <> ''")
                for (value,) in cursor.fetchall():
                    try:
                        decrypt(value)
                    except ValueError:
                        count += 1
    return count
