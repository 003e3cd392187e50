"""`amux restore FILE`, as an operator runs it: real work in one installation (tickets,
sessions and turns, prompts, policy versions, goals, a provider's encrypted key), `amux
backup`, then `amux restore` into a fresh installation (its own data directory, and on
PostgreSQL its own database) finds every row of every table; a backup from a newer amux
is refused with nothing changed; the version is printed and served."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from tests import factories as f

pytestmark = pytest.mark.django_db(transaction=True)
MANAGE = [sys.executable, "manage.py", "amux"]


def _make_real_work() -> None:
    from goals.models import Goal
    from policy import services as policy
    from prompts_app import service as prompts
    from sessions.models import Turn

    f.TicketFactory()
    session = f.SessionFactory()
    Turn.objects.create(session=session, seq=1, key="t1", state="completed",
                        prompt_revisions=[1])
    provider = f.ProviderProfileFactory(slug="restored-provider")
    provider.secrets = {"api_key": "sk-kept-through-restore"}
    provider.save()
    prompts.save("team.worker", "Kept through a restore.", 0, origin="api")
    policy.save({"acceptance": "manual", "sources": {}}, None)
    Goal.objects.create(slug="ship", title="Ship it", check_command="make check")


def _counts(cursor) -> dict[str, int]:
    out = {}
    for table in sorted(connection.introspection.table_names()):
        cursor.execute(f'SELECT COUNT(*) FROM "{table}"')  # noqa: S608 (a table's name)
        out[table] = cursor.fetchone()[0]
    return out


class Installation:
    """A fresh installation beside the test's: its own data directory and (PostgreSQL)
    database, driven through `manage.py amux` in a process of its own."""

    def __init__(self, root: Path):
        self.data_dir = root / "data"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in {"DATABASE_URL", "AMUX_SECRET_KEY"}}
        self.env.update(AMUX_DATA_DIR=str(self.data_dir), PYTHONUNBUFFERED="1",
                        DJANGO_SETTINGS_MODULE="amux_site.settings")
        self.database = None
        if connection.vendor == "postgresql":
            self.database = f"amux_restore_{uuid.uuid4().hex[:10]}"
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{self.database}"')
            db = connection.settings_dict
            self.env["DATABASE_URL"] = (f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:"
                                        f"{db['PORT'] or 5432}/{self.database}")

    def amux(self, *args, secret_key: str | None = None) -> subprocess.CompletedProcess:
        return self.manage("amux", *args, secret_key=secret_key)

    def manage(self, *args, secret_key: str | None = None) -> subprocess.CompletedProcess:
        env = dict(self.env, **({"AMUX_SECRET_KEY": secret_key} if secret_key else {}))
        return subprocess.run([sys.executable, "manage.py", *args], env=env,
                              cwd=settings.BASE_DIR, text=True, capture_output=True,
                              timeout=180)

    def counts(self) -> dict[str, int]:
        if self.database is None:
            with sqlite3.connect(self.data_dir / "amux.sqlite3") as db:
                cursor = db.cursor()
                return _counts(cursor)
        import psycopg

        db = connection.settings_dict
        with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432,
                             user=db["USER"], dbname=self.database) as conn:
            return _counts(conn.cursor())

    def drop(self) -> None:
        if self.database:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


@pytest.fixture
def fresh(tmp_path):
    made = []

    def make(name: str) -> Installation:
        made.append(Installation(tmp_path / name))
        return made[-1]

    yield make
    for installation in made:
        installation.drop()


def test_a_backup_restored_into_a_fresh_installation_has_every_row(capsys, tmp_path, fresh):
    _make_real_work()
    call_command("amux", "backup", "--to", str(tmp_path / "copies"))
    copy = Path(capsys.readouterr().out.strip())
    with connection.cursor() as cursor:
        before = _counts(cursor)
    from goals.models import Goal
    from policy.models import PolicyVersion
    from prompts_app.models import PromptVersion
    from sessions.models import ProviderProfile, Session, Turn
    from tickets.models import Ticket

    for model in (Ticket, Session, Turn, ProviderProfile, PromptVersion, PolicyVersion, Goal):
        assert before[model._meta.db_table] >= 1, model

    # with the key of the installation that made it: everything, secrets readable
    target = fresh("same-key")
    done = target.amux("restore", str(copy), secret_key=settings.SECRET_KEY)
    assert done.returncode == 0, done.stderr
    assert f"amux: restored {copy}" in done.stdout and "warning" not in done.stdout
    assert "the database as it was" not in done.stdout  # a fresh installation had none
    assert target.counts() == before
    shown = target.manage("shell", "-c", "from sessions.models import ProviderProfile; "
                        "print(ProviderProfile.objects.get(slug='restored-provider')"
                        ".secrets['api_key'])", secret_key=settings.SECRET_KEY)
    assert shown.stdout.strip().splitlines()[-1] == "sk-kept-through-restore", shown.stderr

    # without it: restored, and told what to copy
    other = fresh("other-key")
    done = other.amux("restore", str(copy))
    assert done.returncode == 0, done.stderr
    assert re.search(r"warning: [1-9]\d* stored secret\(s\)", done.stdout), done.stdout
    assert "copy the secret_key file" in done.stdout

    # a second restore over a database with rows keeps that database as a backup first
    done = target.amux("restore", str(copy), secret_key=settings.SECRET_KEY)
    assert done.returncode == 0, done.stderr
    kept = next(line for line in done.stdout.splitlines() if "as it was is kept" in line)
    assert Path(kept.rsplit(" ", 1)[-1]).exists()
    assert target.counts() == before


def test_a_backup_from_a_newer_amux_is_refused_and_nothing_changes(capsys, tmp_path, fresh):
    _make_real_work()
    call_command("amux", "backup", "--to", str(tmp_path / "copies"))
    copy = Path(capsys.readouterr().out.strip())
    newer = fresh("newer")
    assert newer.amux("restore", str(copy), secret_key=settings.SECRET_KEY).returncode == 0
    # the newer amux: one migration more than this one knows, then its backup
    added = newer.manage("shell", "-c", "from django.db import connection; "
                       "c = connection.cursor(); c.execute(\"INSERT INTO django_migrations "
                       "(app, name, applied) VALUES ('sessions', '9999_from_a_newer_amux', "
                       "CURRENT_TIMESTAMP)\")", secret_key=settings.SECRET_KEY)
    assert added.returncode == 0, added.stderr
    made = newer.amux("backup", "--to", str(tmp_path / "newer-copies"),
                      secret_key=settings.SECRET_KEY)
    assert made.returncode == 0, made.stderr
    newer_copy = Path(made.stdout.strip())

    target = fresh("target")
    assert target.amux("restore", str(copy), secret_key=settings.SECRET_KEY).returncode == 0
    before = target.counts()
    refused = target.amux("restore", str(newer_copy), secret_key=settings.SECRET_KEY)
    assert refused.returncode == 1
    assert "was made by a newer amux" in refused.stderr
    assert "sessions.9999_from_a_newer_amux" in refused.stderr
    assert "nothing was changed" in refused.stderr
    assert target.counts() == before
    assert not (target.data_dir / "backups").exists()  # not even a safety copy was taken


def test_what_is_not_a_backup_of_this_database_is_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    for path, said in ((text, "is not a backup `amux backup` wrote"),
                       (tmp_path / "missing.sqlite3", "no file at")):
        with pytest.raises(CommandError) as refused:
            call_command("amux", "restore", str(path))
        assert refused.value.returncode == 1 and said in str(refused.value)
    other_kind = tmp_path / ("amux.pgdump" if connection.vendor == "sqlite" else "a.sqlite3")
    other_kind.write_bytes(b"PGDMP\x01\x0e" if connection.vendor == "sqlite"
                           else b"SQLite format 3\x00" + bytes(100))
    with pytest.raises(CommandError) as refused:
        call_command("amux", "restore", str(other_kind))
    assert "backup and this installation's database is" in str(refused.value)


def test_the_version_is_printed_and_served(client, operator):
    from amux_site.version import version

    done = subprocess.run([*MANAGE, "--version"], cwd=settings.BASE_DIR, text=True,
                          capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == version()
    assert version().count(".") == 2
    assert client.get("/healthz").json()["version"] == version()
    client.force_login(operator)
    page = client.get("/panel/tickets/").content.decode()
    assert f'amux <span id="amux-version">{version()}</span>' in page
    changelog = (Path(settings.BASE_DIR) / "CHANGELOG.md").read_text()
    assert f"## {version()}" in changelog
