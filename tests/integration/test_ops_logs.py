"""Quiet, useful logs: periodic task lines below INFO, a refused permission in one line,
AMUX_LOG_FORMAT=json one object per line."""

from __future__ import annotations

import json
import logging
import logging.config
import sys

import pytest
from django.conf import settings

from amux_site import logs

pytestmark = pytest.mark.django_db


@pytest.fixture
def configured(capsys):
    """settings.LOGGING applied for real, its console handler writing to captured stderr;
    restored afterwards."""
    def apply(fmt="plain"):
        logging.config.dictConfig(logs.config(fmt))
    yield apply
    logging.config.dictConfig(settings.LOGGING)


def _record(name, level, msg, *args, exc_info=None, **extra):
    logger = logging.getLogger(name)
    record = logger.makeRecord(name, level, __file__, 1, msg, args, exc_info, extra=extra)
    logger.handle(record)


def test_periodic_task_lines_are_not_logged_at_info(configured, capsys):
    configured()
    _record("celery.beat", logging.INFO, "Scheduler: Sending due task %s (%s)",
            "outbox-sweep", "effects.drain_outbox")
    _record("celery.worker.strategy", logging.INFO,
            "Task effects.drain_outbox[5b1c] received")
    _record("celery.app.trace", logging.INFO,
            "Task sessions.sweep[5b1d] succeeded in 0.01s: 0")
    # a task someone asked for is still reported, and a periodic task's failure too
    _record("celery.app.trace", logging.INFO, "Task sessions.host[5b1e] succeeded in 3s")
    _record("celery.app.trace", logging.ERROR, "Task effects.drain_outbox[5b1f] raised")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert "sessions.host" in lines[0] and "INFO" in lines[0]
    assert "drain_outbox" in lines[1] and "ERROR" in lines[1]
    assert logs.periodic_task_names() >= {"effects.drain_outbox", "sessions.sweep",
                                          "intake.sweep"}


def test_periodic_lines_show_at_debug(configured, capsys):
    configured()
    logs.periodic_task_names()  # loading the apps' tasks may configure logging anew
    logging.getLogger().setLevel(logging.DEBUG)
    _record("celery.worker.strategy", logging.INFO, "Task effects.drain_outbox[1] received")
    assert "DEBUG celery.worker.strategy Task effects.drain_outbox" in capsys.readouterr().err


def test_a_refused_permission_is_one_line_without_traceback(configured, capsys, client,
                                                             viewer):
    configured()
    client.force_login(viewer)
    response = client.post("/panel/tickets/1/stop/")
    assert response.status_code == 403
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert [x for x in err.splitlines() if "/panel/tickets/1/stop/" in x] == [
        next(x for x in err.splitlines() if "Forbidden" in x)]
    assert len(err.splitlines()) == 1, err


def test_an_unauthenticated_api_call_is_one_line(configured, capsys, client):
    configured()
    assert client.post("/api/v1/providers/", {}).status_code in (401, 403)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "/api/v1/providers/" in err[0], err


def test_json_format_is_one_object_per_line_with_the_exception(configured, capsys):
    configured("json")
    logging.getLogger("amux.test").warning("plain %s", "words")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("amux.test").exception("it failed")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    first, second = (json.loads(x) for x in lines)
    assert first["level"] == "WARNING" and first["logger"] == "amux.test"
    assert first["message"] == "plain words" and "exception" not in first
    assert first["time"].endswith("+00:00")
    assert second["level"] == "ERROR" and second["message"] == "it failed"
    assert "Traceback" in second["exception"] and "ValueError: boom" in second["exception"]


def test_the_json_printer_of_amux_run_wraps_what_is_not_json(capsys):
    from datetime import datetime

    from honcho.printer import Message

    printer = logs.json_printer(sys.stdout)
    printer.write(Message(type="line", data=b'{"level": "INFO", "message": "hi"}\n'
                                            b"celery banner line\n\n",
                          time=datetime.now(), name="default", colour=None))
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"level": "INFO", "message": "hi", "process": "default"}
    assert lines[1]["message"] == "celery banner line"
    assert lines[1]["process"] == "default" and lines[1]["level"] == "INFO"
    assert len(lines) == 2


def test_log_format_is_read_from_the_environment(tmp_path):
    import os
    import subprocess

    code = ("from django.conf import settings; import django; django.setup(); "
            "print(settings.LOG_FORMAT, settings.LOGGING['formatters']['main'])")
    env = {**os.environ, "AMUX_LOG_FORMAT": "json", "AMUX_EMBEDDED_REDIS": "attach",
           "DJANGO_SETTINGS_MODULE": "amux_site.settings"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=settings.BASE_DIR, timeout=60)
    assert out.stdout.startswith("json {'()': 'amux_site.logs.JsonFormatter'}"), out.stderr
