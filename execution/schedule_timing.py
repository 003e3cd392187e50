"""When a schedule fires: its slots, from an interval or a five-field cron expression (UTC).

A slot is the exact time a firing belongs to, so "once per slot" can be a unique key. Cron
arithmetic is Celery's own (``celery.schedules.crontab``, what beat uses), never ours.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from celery.schedules import crontab

MIN_EVERY_SECONDS = 10
MAX_EVERY_SECONDS = 366 * 24 * 3600
CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


class TimingError(ValueError):
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def parse_cron(expr: str) -> crontab:
    parts = expr.split()
    if len(parts) != len(CRON_FIELDS):
        raise TimingError("cron takes five fields: minute hour day-of-month month "
                          "day-of-week (UTC)", "cron")
    try:
        return crontab(**dict(zip(CRON_FIELDS, parts, strict=True)))
    except (ValueError, TypeError, IndexError) as exc:
        raise TimingError(f"invalid cron expression {expr!r}: {exc}", "cron") from exc


def check(cron: object, every_seconds: object) -> tuple[str, int | None]:
    """Exactly one of the two, valid: ``(cron, None)`` or ``("", seconds)``."""
    has_cron = cron not in (None, "")
    has_every = every_seconds is not None
    if has_cron == has_every:
        field = "cron" if has_cron else "every_seconds"
        raise TimingError("give exactly one of cron and every_seconds", field)
    if has_cron:
        if not isinstance(cron, str):
            raise TimingError("cron must be a string", "cron")
        expr = " ".join(cron.split())
        parse_cron(expr)
        return expr, None
    if isinstance(every_seconds, bool) or not isinstance(every_seconds, int):
        raise TimingError("every_seconds must be a whole number of seconds", "every_seconds")
    if not MIN_EVERY_SECONDS <= every_seconds <= MAX_EVERY_SECONDS:
        raise TimingError(f"every_seconds must be between {MIN_EVERY_SECONDS} and "
                          f"{MAX_EVERY_SECONDS}", "every_seconds")
    return "", every_seconds


def next_slot(*, cron: str, every_seconds: int | None, anchor: datetime,
              after: datetime) -> datetime:
    """The first slot strictly after ``after``. Interval slots are ``anchor + k·every``, so
    a late or repeated due check never shifts them."""
    after = after.astimezone(UTC)
    if every_seconds:
        k = max(0, math.floor((after - anchor).total_seconds() / every_seconds)) + 1
        return anchor + timedelta(seconds=k * every_seconds)
    schedule = parse_cron(cron)
    schedule.nowfun = lambda: after
    start, delta, _now = schedule.remaining_delta(after, tz=UTC)
    return (start + delta).astimezone(UTC)


def describe(cron: str, every_seconds: int | None) -> str:
    if every_seconds:
        return f"every {every_seconds} s"
    return f"cron {cron} (UTC)"
