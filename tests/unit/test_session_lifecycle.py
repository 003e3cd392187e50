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


@pytest.mark.parametrize(("current", "command", "busy", "answer"), [
    (lc.IDLE, lc.SLEEP, False, None),
    (lc.SLEEPING, lc.SLEEP, False, None),  # asleep already: stays so, not refused
    (lc.RUNNING, lc.SLEEP, True, "busy"),
    (lc.IDLE, lc.ARCHIVE_COMMAND, True, "busy"),  # queued work is served first
    (lc.CREATED, lc.ARCHIVE_COMMAND, False, None),
    (lc.ARCHIVED, lc.SLEEP, False, "session_archived"),
    (lc.ARCHIVED, lc.ARCHIVE_COMMAND, True, lc.ALREADY),  # archiving twice is no error
])
def test_what_a_command_may_do_now(current, command, busy, answer):
    assert lc.refusal(current, command, work_in_flight=busy) == answer


def test_an_unknown_command_is_named():
    with pytest.raises(ValueError, match="'wake'"):
        lc.refusal(lc.IDLE, "wake", work_in_flight=False)


def test_a_host_retires_only_what_it_holds_and_only_when_nothing_waits():
    assert lc.may_retire(holds_lease=True, work_waiting=False) is True
    assert lc.may_retire(holds_lease=True, work_waiting=True) is False
    assert lc.may_retire(holds_lease=False, work_waiting=False) is None
    assert lc.may_retire(holds_lease=False, work_waiting=True) is None
