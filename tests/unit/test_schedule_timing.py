"""Schedule slots: exact interval grids from the definition, cron by Celery's arithmetic,
and the one-of-two timing rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from execution.schedule_timing import TimingError, check, next_slot

T0 = datetime(2026, 12, 2, 1, 7, 30, 250_000, tzinfo=UTC)


def test_interval_slots_stay_on_the_grid_however_late_the_check():
    def after(seconds):
        return next_slot(cron="", every_seconds=10, anchor=T0,
                         after=T0 + timedelta(seconds=seconds))

    assert after(0) == T0 + timedelta(seconds=10)
    assert after(9.9) == T0 + timedelta(seconds=10)
    assert after(10) == T0 + timedelta(seconds=20)  # strictly after
    assert after(13.7) == T0 + timedelta(seconds=20)
    assert after(-5) == T0 + timedelta(seconds=10)


def test_cron_slots_are_the_next_matching_minute_in_utc():
    assert next_slot(cron="*/5 * * * *", every_seconds=None, anchor=T0, after=T0) == \
        datetime(2026, 12, 2, 1, 10, tzinfo=UTC)
    assert next_slot(cron="0 9 * * 1-5", every_seconds=None, anchor=T0, after=T0) == \
        datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    exactly = datetime(2026, 12, 2, 1, 10, tzinfo=UTC)
    assert next_slot(cron="*/5 * * * *", every_seconds=None, anchor=T0, after=exactly) == \
        datetime(2026, 12, 2, 1, 15, tzinfo=UTC)


@pytest.mark.parametrize(("cron", "every", "field"), [
    ("*/5 * * * *", 60, "cron"), (None, None, "every_seconds"), ("", None, "every_seconds"),
    (None, 9, "every_seconds"), (None, True, "every_seconds"), (None, 10.5, "every_seconds"),
    ("61 * * * *", None, "cron"), ("* * *", None, "cron"), (5, None, "cron"),
    ("0 0 30 2 *", None, "cron"),
])
def test_timing_refusals_name_the_field(cron, every, field):
    with pytest.raises(TimingError) as refused:
        check(cron, every)
    assert refused.value.field == field


def test_valid_timings_are_normalised():
    assert check("*/5   *  * * *", None) == ("*/5 * * * *", None)
    assert check(None, 10) == ("", 10)
