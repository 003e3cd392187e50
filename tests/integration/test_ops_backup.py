"""`amux backup` (a consistent, private copy: SQLite's online backup or pg_dump) and
`amux upgrade` (waits for running turns, backs up, migrates)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from sessions.models import Session, Turn, TurnState

pytestmark = pytest.mark.django_db(transaction=True)


def _backup(capsys, *args) -> str:
    call_command("amux", "backup", *args)
    return capsys.readouterr().out.strip()


def test_backup_writes_a_private_consistent_copy_and_prints_it(capsys, tmp_path,
                                                                django_user_model):
    django_user_model.objects.create_user("kept-in-the-copy")
    printed = _backup(capsys, "--to", str(tmp_path / "copies"))
    copy = tmp_path / "copies" / printed.rsplit("/", 1)[-1]
    assert printed == str(copy) and copy.exists()
    assert copy.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "copies").stat().st_mode & 0o777 == 0o700
    assert list((tmp_path / "copies").iterdir()) == [copy]  # no partial file left
    if connection.vendor == "sqlite":
        assert copy.suffix == ".sqlite3"
        with sqlite3.connect(copy) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            names = [r[0] for r in db.execute("SELECT username FROM auth_user")]
        assert names == ["kept-in-the-copy"]
    else:
        assert copy.suffix == ".pgdump"
        listing = subprocess.run([shutil.which("pg_restore"), "--list", str(copy)],
                                 capture_output=True, text=True, check=True).stdout
        assert "TABLE DATA public auth_user" in listing


def test_backup_defaults_to_the_data_directory(capsys, tmp_path, settings):
    settings.DATA_DIR = tmp_path / "data"
    printed = _backup(capsys)
    assert printed.startswith(str(tmp_path / "data" / "backups" / "amux-"))


def test_backup_into_a_directory_it_cannot_write_fails_clearly(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(CommandError) as failure:
        call_command("amux", "backup", "--to", str(blocked / "x"))
    assert failure.value.returncode == 1
    assert "cannot create" in str(failure.value)


def _running_turn() -> Turn:
    session = Session.objects.create(runtime="pi", workdir="/tmp/amux-upgrade-test")
    return Turn.objects.create(session=session, seq=1, key="k", state=TurnState.RUNNING)


def test_upgrade_waits_for_running_turns_and_changes_nothing_on_timeout(capsys, tmp_path,
                                                                        settings):
    settings.DATA_DIR = tmp_path / "data"
    _running_turn()
    with pytest.raises(CommandError) as failure:
        call_command("amux", "upgrade", "--timeout", "1")
    assert failure.value.returncode == 1
    assert "1 turn(s) still running after 1 s; nothing was changed" in str(failure.value)
    assert not (tmp_path / "data" / "backups").exists()
    assert "waiting for 1 running turn(s)" in capsys.readouterr().out


def test_upgrade_backs_up_and_migrates_once_the_turn_ends(capsys, tmp_path, settings):
    import threading

    settings.DATA_DIR = tmp_path / "data"
    turn = _running_turn()

    def finish():
        Turn.objects.filter(pk=turn.pk).update(state=TurnState.COMPLETED)
        connection.close()

    timer = threading.Timer(1.5, finish)
    timer.start()
    try:
        call_command("amux", "upgrade", "--timeout", "30")
    finally:
        timer.join()
    out = capsys.readouterr().out
    assert "amux: backed up to " + str(tmp_path / "data" / "backups") in out
    assert "amux: database migrated" in out
    assert "not running; `make run` starts the new version" in out
    assert len(list((tmp_path / "data" / "backups").iterdir())) == 1
