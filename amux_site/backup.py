"""`amux backup` and the waiting part of `amux upgrade`.

A backup is a consistent copy taken while amux runs: SQLite's online backup API (pages
copied under the database's own locking, so a write in progress is never half-copied), or
`pg_dump` on PostgreSQL (one snapshot transaction; restore with `pg_restore`). The file is
private to the service user (0600) and its name says when it was taken.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from sessions.models import Turn, TurnState


class BackupError(RuntimeError):
    pass


def _target_dir(to: str | os.PathLike | None) -> Path:
    target = Path(to).expanduser().resolve() if to else settings.DATA_DIR / "backups"
    try:
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupError(f"cannot create {target}: {exc.strerror}") from None
    if not os.access(target, os.W_OK):
        raise BackupError(f"cannot write to {target}")
    return target


def _private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 whatever the umask, before anything is in it."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.chmod(path, 0o600)


def backup(to: str | os.PathLike | None = None) -> Path:
    """Write a consistent copy of the database into `to`; return the file written."""
    target = _target_dir(to)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return _sqlite(Path(db["NAME"]), target / f"amux-{stamp}.sqlite3")
    if connection.vendor == "postgresql":
        return _postgres(db, target / f"amux-{stamp}.pgdump")
    raise BackupError(f"no backup method for a {connection.vendor} database")


def _sqlite(source: Path, dest: Path) -> Path:
    if not source.exists():
        raise BackupError(f"no database at {source} (run `amux run` once to create it)")
    partial = dest.with_name(dest.name + ".partial")
    _private_file(partial)
    try:
        src = sqlite3.connect(source, timeout=30)
        try:
            out = sqlite3.connect(partial)
            try:
                src.backup(out)
            finally:
                out.close()
        finally:
            src.close()
        partial.replace(dest)
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        raise BackupError(f"SQLite backup failed: {exc}") from None
    return dest


def _postgres(db: dict, dest: Path) -> Path:
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        raise BackupError("pg_dump not found (install the PostgreSQL client tools)")
    env = {**os.environ}
    for key, var in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER"),
                     ("PASSWORD", "PGPASSWORD")):
        if db.get(key):
            env[var] = str(db[key])
    partial = dest.with_name(dest.name + ".partial")
    _private_file(partial)
    result = subprocess.run(
        [pg_dump, "--format=custom", "--no-owner", f"--file={partial}", "--dbname",
         str(db["NAME"])], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        why = (result.stderr.strip().splitlines() or ["no reason given"])[-1]
        raise BackupError(f"pg_dump exited {result.returncode}: {why}")
    os.chmod(partial, 0o600)
    partial.replace(dest)
    return dest


def running_turns() -> int:
    """Turns a worker is in the middle of (what a restart would interrupt)."""
    return Turn.objects.filter(state=TurnState.RUNNING).count()


def wait_for_no_running_turns(timeout: float, say: Callable[[str], None],
                              poll: float = 2.0) -> int:
    """Wait until no turn runs; 0 then, else how many still ran at the deadline."""
    deadline = time.monotonic() + timeout
    running = running_turns()
    if running:
        say(f"amux: waiting for {running} running turn(s) to end (up to {timeout:.0f} s)")
    while running and time.monotonic() < deadline:
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        running = running_turns()
    return running
