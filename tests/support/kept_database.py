"""`python -m tests.support.kept_database`: the kept database of this amux release, made
anew under tests/fixtures/db-<version>/ (version: pyproject.toml's).

Run it once when a release is cut, never to edit an old one (docs/contributors.md): the
upgrade test (tests/integration/test_upgrade_from_kept_db.py) migrates every kept database
to the schema of the day. It makes real work (tests/support/kept_work.py) twice, each time
in a fresh installation of its own — a SQLite file, and a new database on the PostgreSQL
server of DATABASE_URL (or --postgres URL), created and dropped — and writes:

- amux.sqlite3.sql  sqlite3's iterdump of the SQLite one (text: it diffs, and stays small)
- amux.pg.sql       `pg_dump --no-owner --no-privileges` of the PostgreSQL one
- manifest.json     the version, the secret key both were made with (a fixed test key,
                    so the test can decrypt their secrets), the applied migrations, and per
                    database every table's row count and the facts the test reads back

Each installation has its own embedded Redis (REDIS_URL is not passed on): nothing the
work leaves in Redis (answer claims, session streams) reaches another run."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from amux_site import embedded_redis
from tests.support import kept_dumps

ROOT = Path(__file__).resolve().parents[2]
# Not a secret: it encrypts only the kept databases' made-up provider keys and source
# secrets, and the test needs it to read them back.
SECRET_KEY = "amux-kept-database-test-key-not-secret"


def version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def fixture_dir() -> Path:
    return ROOT / "tests" / "fixtures" / f"db-{version()}"


def _work(data_dir: Path, database_url: str | None) -> dict:
    """kept_work in an installation of its own (a process with its own settings)."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "AMUX_SECRET_KEY",
                        "DJANGO_SETTINGS_MODULE"}}
    env.update(AMUX_DATA_DIR=str(data_dir), AMUX_SECRET_KEY=SECRET_KEY,
               DJANGO_SETTINGS_MODULE="amux_site.settings", PYTHONPATH=str(ROOT))
    if database_url:
        env["DATABASE_URL"] = database_url
    out = data_dir / "made.json"
    try:
        done = subprocess.run([sys.executable, "-m", "tests.support.kept_work", str(out)],
                              cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    finally:
        embedded_redis.stop(data_dir)
    if done.returncode != 0:
        raise SystemExit(f"the kept work failed ({'PostgreSQL' if database_url else 'SQLite'})"
                         f": kept_work exited {done.returncode}")
    return json.loads(out.read_text())


def make(target: Path, postgres: str) -> dict:
    target.mkdir(parents=True, exist_ok=True)
    manifest = {"version": version(), "secret_key": SECRET_KEY,
                "regenerate": "python -m tests.support.kept_database (see its docstring)",
                "databases": {}}
    with tempfile.TemporaryDirectory(prefix="amux-kept-") as tmp:
        # the runtime users amux starts processes as (linux-dac) pass through, never list
        Path(tmp).chmod(0o711)
        data = Path(tmp) / "sqlite"
        data.mkdir()
        made = _work(data, None)
        kept_dumps.sqlite_dump(data / "amux.sqlite3", target / kept_dumps.SQLITE_DUMP)
        migrations, counts = kept_dumps.sqlite_contents(data / "amux.sqlite3")
        manifest["migrations"] = migrations
        manifest["empty_by_design"] = made["empty_by_design"]
        manifest["databases"]["sqlite"] = {"file": kept_dumps.SQLITE_DUMP, "tables": counts,
                                           "facts": made["facts"]}
        with kept_dumps.scratch_postgres(postgres, "kept_gen") as url:
            data = Path(tmp) / "postgresql"
            data.mkdir()
            made = _work(data, url)
            kept_dumps.pg_dump(url, target / kept_dumps.PG_DUMP)
            pg_migrations, counts = kept_dumps.pg_contents(url)
        if pg_migrations != migrations:
            raise SystemExit("the two databases have different migrations applied")
        manifest["databases"]["postgresql"] = {"file": kept_dumps.PG_DUMP, "tables": counts,
                                               "facts": made["facts"]}
    (target / kept_dumps.MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True)
                                              + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.kept_database",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("DATABASE_URL", ""),
                        help="a PostgreSQL server's URL, naming any database that exists "
                             "on it (the work gets a new one); default DATABASE_URL")
    parser.add_argument("--force", action="store_true",
                        help="write over this version's kept database (only before the "
                             "release is cut)")
    args = parser.parse_args(argv)
    if not args.postgres.startswith(("postgres://", "postgresql://")):
        parser.error("a PostgreSQL server is needed: set DATABASE_URL or --postgres")
    target = fixture_dir()
    if (target / kept_dumps.MANIFEST).exists() and not args.force:
        parser.error(f"{target.relative_to(ROOT)} exists: a kept database is never edited "
                     "(--force only before its release is cut)")
    made = make(target, args.postgres)
    print(f"wrote {target.relative_to(ROOT)}: amux {made['version']}, "
          f"{len(made['migrations'])} migrations, "
          f"{len(made['databases']['sqlite']['tables'])} tables")


if __name__ == "__main__":
    main()
