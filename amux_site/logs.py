"""How amux logs: quiet at INFO, one line per refusal, JSON for machines.

settings.LOGGING wires these in (AMUX_LOG_FORMAT=json selects JsonFormatter); the Celery
processes use the same configuration (amux_site/celery.py), so the web server, workers and
beat all write the same shape.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# Loggers that write one INFO line per task sent, received or finished. For the tasks
# beat sends every few seconds those lines say only that the clock ticks.
_TASK_LOGGERS = ("celery.beat", "celery.worker.strategy", "celery.app.trace")


_tasks_loaded: list[bool] = []


def periodic_task_names() -> frozenset[str]:
    """The tasks beat sends on a schedule (apps add theirs when their tasks load)."""
    from amux_site.celery import app

    if not _tasks_loaded:
        # loads every app's tasks (and may set Django, and so logging, up): once
        _tasks_loaded.append(True)
        app.loader.import_default_modules()
    return frozenset(entry["task"] for entry in (app.conf.beat_schedule or {}).values())


class QuietPeriodic(logging.Filter):
    """Demote the per-run INFO lines of beat's periodic tasks to DEBUG.

    They still show when the root logger is at DEBUG; their warnings and errors (a task
    that fails) are untouched."""

    def _periodic(self, record: logging.LogRecord) -> bool:
        try:
            names = periodic_task_names()
        except Exception:  # settings or apps not ready yet: nothing to recognise
            return False
        text = record.getMessage()
        return any(name in text for name in names)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not record.name.startswith(_TASK_LOGGERS):
            return True
        if not self._periodic(record):
            return True
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


class OneLineRefusals(logging.Filter):
    """A refused request (401/403) is an expected answer, not a fault: log its one line
    without the traceback Django attaches to a raised PermissionDenied."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) in (401, 403):
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the exception's text
    when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def config(fmt: str) -> dict:
    """settings.LOGGING for AMUX_LOG_FORMAT `fmt` ("plain" or "json")."""
    formatter = ({"()": "amux_site.logs.JsonFormatter"} if fmt == "json"
                 else {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"})
    handler = {"class": "logging.StreamHandler", "formatter": "main",
               "filters": ["quiet_periodic", "one_line_refusals"]}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "quiet_periodic": {"()": "amux_site.logs.QuietPeriodic"},
            "one_line_refusals": {"()": "amux_site.logs.OneLineRefusals"},
        },
        "formatters": {"main": formatter},
        "handlers": {"console": handler},
        "root": {"handlers": ["console"], "level": "INFO"},
        "loggers": {
            "django.db.backends": {"level": "WARNING"},
            # the MCP SDK logs every stateless request's transport teardown at INFO
            "mcp.server.streamable_http": {"level": "WARNING"},
            # its start-up banner in every process, and a line per login or reset
            "axes": {"level": "WARNING"},
            # uvicorn's own handlers would bypass the format; send them through ours
            "uvicorn": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"handlers": [], "level": "INFO", "propagate": True},
            # dictConfig resets the children of a configured logger, which would bring back
            # the access line per request that `--no-access-log` turned off
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def json_line(message: str, logger: str = "amux.run", level: str = "INFO",
              **extra) -> str:
    """A plain line (amux run's own, or a child's non-JSON output) as a JSON log entry."""
    return json.dumps({"time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                       "level": level, "logger": logger, "message": message, **extra},
                      ensure_ascii=False)


class JsonLines:
    """A text stream that writes each line given to it as a JSON log entry."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                self.stream.write(json_line(line) + "\n")
        self.stream.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False


def json_printer(output):
    """A honcho printer for AMUX_LOG_FORMAT=json: every line one JSON object carrying the
    name of the process that wrote it; a child's JSON entries pass through, anything else
    it prints (a startup banner, a crash before logging is set up) is wrapped."""
    from honcho.printer import Printer

    class JsonPrinter(Printer):
        def write(self, message):
            data = message.data
            if isinstance(data, bytes):
                data = data.decode("utf-8", "replace")
            process = message.name or "amux"
            for line in data.splitlines():
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    entry = None
                if isinstance(entry, dict):
                    entry.setdefault("process", process)
                    text = json.dumps(entry, ensure_ascii=False)
                else:
                    text = json_line(line.rstrip(), logger=f"amux.{process}", process=process)
                print(text, file=self.output, flush=True)

    return JsonPrinter(output, colour=False, prefix=False)
