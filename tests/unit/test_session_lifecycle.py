"""The session lifecycle's one table (sessions/core/lifecycle.py)."""

import pytest

from sessions.core import lifecycle as lc
from sessions.models import Lifecycle, SleepReason


def test_the_table_has_a_cell_for_every_state_and_event_and_names_only_known_states():
    assert set(lc.TABLE) == {(s, e) for s in lc.STATES for e in lc.EVENTS}
    assert set(lc.TABLE.values()) <= set(lc.STATES)
    assert set(lc.STATES) == set(Lifecycle.values)  # the model's choices are the table's


@pytest.mark.parametrize("event", lc.EVENTS)
def test_nothing_leaves_archived(event):
    assert lc.after(lc.ARCHIVED, event, "why") == lc.Change(lc.ARCHIVED, None)


def test_a_session_s_life():
    assert lc.after(lc.CREATED, lc.RUNTIME_STARTED) == lc.Change(lc.IDLE, "")
    assert lc.after(lc.IDLE, lc.TURN_STARTED) == lc.Change(lc.RUNNING, "")
    assert lc.after(lc.RUNNING, lc.TURN_ENDED) == lc.Change(lc.IDLE, None)
    assert lc.after(lc.IDLE, lc.RETIRED, SleepReason.IDLE_TIMEOUT) == lc.Change(
        lc.SLEEPING, "idle_timeout")
    # woken again: the reason of the last sleep goes
    assert lc.after(lc.SLEEPING, lc.RUNTIME_STARTED) == lc.Change(lc.IDLE, "")
    assert lc.after(lc.SLEEPING, lc.ARCHIVE) == lc.Change(lc.ARCHIVED, None)


def test_apply_writes_the_change_onto_the_row():
    class Row:
        lifecycle, sleep_reason = lc.RUNNING, "manual"

    row = Row()
    lc.apply(row, lc.TURN_ENDED)
    assert (row.lifecycle, row.sleep_reason) == (lc.IDLE, "manual")  # kept: not a sleep
    lc.apply(row, lc.RETIRED, "restart_failed")
    assert (row.lifecycle, row.sleep_reason) == (lc.SLEEPING, "restart_failed")
