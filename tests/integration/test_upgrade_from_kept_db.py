"""Every kept database migrates to the schema of the day with its rows intact.

Under tests/fixtures/db-<version>/ is a database made by amux <version> with real rows of
every kind (tests/support/kept_work.py: tickets in several stages, a policy's versions,
prompt revisions, sessions and their timelines, the outbox, goals, Lark conversations,
tokens, memory …), as a SQLite text dump and a PostgreSQL plain dump, and a manifest of
what it holds. This test loads the dump of the backend the suite runs on into a fresh
installation of its own — a SQLite file in a new data directory, or a new PostgreSQL
database `kept_<random>` it creates and drops (pytest-django's test database is never
touched) — runs the real `migrate` there in a process of its own
(tests/support/kept_check.py), and checks: every migration it had is known to this amux
and none is left to apply, every table has at least the rows it had, the chosen facts read
the same through the ORM (a ticket's mandate, the policy's version, a prompt revision, the
secrets decrypted with the kept test key, a session's timeline in order, a goal's todos),
and amux still works on it (the tickets over the API and in the panel, an input added).

When a release is cut, keep its database (never edit an old one; docs/contributors.md):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m tests.support.kept_database

writes tests/fixtures/db-<pyproject's version>/ (it refuses to write over one that exists).
A later migration that renames or drops a table on purpose names it in RENAMED_OR_DROPPED.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from amux_site import embedded_redis
from tests.support import kept_dumps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KEPT = sorted(FIXTURES.glob("db-*/manifest.json"))
# table of a kept database → its table today (None: dropped on purpose), with the reason
RENAMED_OR_DROPPED: dict[str, str | None] = {}


def _backend() -> str:
    return "postgresql" if connection.vendor == "postgresql" else "sqlite"


def _server_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return (f"postgres://{db['USER'] or 'postgres'}{password}@{db['HOST'] or '127.0.0.1'}:"
            f"{db['PORT'] or 5432}/postgres")


def _migrated(kept: dict, data_dir: Path, secret_key: str, database_url: str | None) -> dict:
    """kept_check in the fresh installation's own process: the real migrate, then what it
    reads."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "AMUX_SECRET_KEY", "DJANGO_SETTINGS_MODULE"}}
    env.update(AMUX_DATA_DIR=str(data_dir), AMUX_SECRET_KEY=secret_key,
               DJANGO_SETTINGS_MODULE="amux_site.settings", PYTHONPATH=str(settings.BASE_DIR))
    if database_url:
        env["DATABASE_URL"] = database_url
    (data_dir / "kept-facts.json").write_text(json.dumps(kept["facts"]))
    try:
        done = subprocess.run([sys.executable, "-m", "tests.support.kept_check",
                               str(data_dir / "kept-facts.json"), str(data_dir / "report.json")],
                              cwd=settings.BASE_DIR, env=env, capture_output=True, text=True,
                              timeout=180, stdin=subprocess.DEVNULL)
    finally:  # without REDIS_URL the installation started a Redis of its own
        embedded_redis.stop(data_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((data_dir / "report.json").read_text())


@pytest.mark.parametrize("manifest_file", KEPT, ids=[p.parent.name for p in KEPT])
def test_a_kept_database_migrates_to_todays_schema_with_its_rows(manifest_file, tmp_path):
    manifest = json.loads(manifest_file.read_text())
    kept = manifest["databases"][_backend()]
    dump = manifest_file.parent / kept["file"]
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    if _backend() == "sqlite":
        kept_dumps.sqlite_load(dump, data_dir / "amux.sqlite3")
        report = _migrated(kept, data_dir, manifest["secret_key"], None)
    else:
        with kept_dumps.scratch_postgres(_server_url(), "kept") as url:
            kept_dumps.pg_load(dump, url)
            report = _migrated(kept, data_dir, manifest["secret_key"], url)

    assert report["migrate"] == {"unknown_before": [], "unapplied_after": []}
    tables = report["tables"]
    fewer = {}
    for table, rows in kept["tables"].items():
        now = RENAMED_OR_DROPPED.get(table, table)
        if now is not None and tables.get(now, -1) < rows:
            fewer[table] = (rows, tables.get(now))
    assert not fewer, f"tables with fewer rows than the kept database had (kept, now): {fewer}"
    assert all(kept["tables"][t] > 0 for t in kept["tables"]
               if t not in manifest["empty_by_design"] and t != "django_migrations")

    facts = report["facts"]
    assert facts == kept["facts"]
    # none of them empty (a manifest that kept nothing would compare equal, and prove nothing)
    assert facts["ticket"]["mandate_text"] and facts["ticket"]["short_name"]
    assert facts["secrets"]["provider"]["api_key"] and facts["secrets"]["source"][
        "webhook_secret"]  # decrypted with the kept key: readable, as they were written
    assert facts["prompt"]["revision"] >= 2 and facts["prompt"]["text"].strip()
    assert facts["policy"]["versions"] >= 3 and facts["policy"]["version"]
    seqs = [seq for seq, _ in facts["session"]["timeline"]]
    assert seqs == list(range(1, len(seqs) + 1))  # in order, none lost
    assert len(facts["session"]["replies"]) >= 2 and all(facts["session"]["replies"])
    assert facts["goal"]["todos"]

    works = report["works"]
    assert works["api_status"] == 200 and facts["ticket"]["id"] in works["api_ids"]
    ticket = facts["ticket"]
    assert works["panel_status"] == 200 and f'href="/panel/tickets/{ticket["id"]}/"' in \
        works["panel_text"]
    assert works["page_status"] == 200 and ticket["short_name"] in works["page_text"]
    assert works["input_status"] in (200, 201, 202) and works["input_kept"]


def test_the_kept_databases_are_there_and_named_by_their_release():
    """Without this, a lost fixture directory would leave the test above with no case."""
    assert KEPT, f"no kept database under {FIXTURES}"
    for manifest_file in KEPT:
        manifest = json.loads(manifest_file.read_text())
        assert manifest_file.parent.name == f"db-{manifest['version']}"
        assert set(manifest["databases"]) == {"sqlite", "postgresql"}
