"""A turn's one table and what a lost host makes of a running turn (sessions/core/turns.py)."""

import pytest

from runtimes import events as rt
from sessions.core import turns as t
from sessions.models import TurnState

LOST = {"code": "host_lost", "message": "the runtime host stopped during this turn"}


def test_the_table_names_only_known_states_and_events():
    assert set(t.STATES) == set(TurnState.values)  # the model's choices are the table's
    assert {s for s, _ in t.TABLE} | set(t.TABLE.values()) <= set(t.STATES)
    assert {e for _, e in t.TABLE} == set(t.EVENTS)
    assert set(t.TERMINALS) == {rt.TurnCompleted.type, rt.TurnFailed.type,
                                rt.TurnCancelled.type}


def test_a_turn_s_life():
    assert t.after(t.QUEUED, t.START) == t.RUNNING
    assert t.after(t.RUNNING, rt.TurnCompleted.type) == t.COMPLETED
    assert t.after(t.RUNNING, rt.TurnFailed.type) == t.FAILED
    assert t.after(t.RUNNING, rt.TurnCancelled.type) == t.CANCELLED
    # the runtime did not start: a queued input ends without having run
    assert t.after(t.QUEUED, rt.TurnFailed.type) == t.FAILED


def test_a_second_start_opens_nothing():
    for state in (t.RUNNING, *t.ENDED):
        assert t.after(state, t.START) is None


@pytest.mark.parametrize("ended", sorted(t.ENDED))
@pytest.mark.parametrize("terminal", list(t.TERMINALS))
def test_an_ended_turn_takes_no_second_terminal(ended, terminal):
    assert t.after(ended, terminal) is None  # late: provenance on the accepted one


def test_an_unknown_event_is_an_error():
    with pytest.raises(ValueError):
        t.after(t.RUNNING, "message.delta")
    with pytest.raises(ValueError):
        t.change("message.delta")


def test_each_event_is_one_conditional_write():
    assert t.change(t.START) == t.Change((t.QUEUED,), t.RUNNING)
    for terminal, end in t.TERMINALS.items():
        assert t.change(terminal) == t.Change((t.QUEUED, t.RUNNING), end)
    for event in t.EVENTS:  # the guard is the table: nothing else ever moves a turn
        change = t.change(event)
        for state in t.STATES:
            assert t.after(state, event) == (change.state if state in change.sources
                                             else None)


def test_an_interrupt_is_noted_once_on_a_running_turn():
    noted = t.interrupt_noted(t.RUNNING, {"text": "fix it"})
    assert noted == {"text": "fix it", "interrupt_requested": True}
    assert t.interrupt_noted(t.RUNNING, noted) is None
    for state in (t.QUEUED, *t.ENDED):
        assert t.interrupt_noted(state, {"text": "fix it"}) is None


def test_a_lost_host_s_turn_ends_cancelled_and_its_input_is_continued():
    lost = t.host_lost("k1", {"text": "fix the parser"}, archived=False, **LOST)
    assert lost.terminal == rt.TurnCancelled(reason="host_lost")
    assert lost.continuation == t.Continuation("k1:resumed",
                                               t.RESUME_TEXT + "fix the parser", None)
    # its continuation cut too: continued once more, told once
    again = t.host_lost(lost.continuation.key, {"text": lost.continuation.text},
                        archived=False, **LOST)
    assert again.continuation.key == "k1:resumed:resumed"
    assert again.continuation.text.count(t.RESUME_TEXT) == 1
    assert t.base_key(again.continuation.key) == "k1"


def test_past_the_bound_a_lost_host_s_turn_fails():
    key = "k1" + t.RESUME_SUFFIX * t.RESUME_LIMIT
    lost = t.host_lost(key, {"text": "x"}, archived=False, **LOST)
    assert lost == t.HostLost(rt.TurnFailed(**LOST), None)


def test_an_archived_session_s_turn_is_not_continued():
    assert t.host_lost("k1", {"text": "x"}, archived=True, **LOST) == t.HostLost(
        rt.TurnFailed(**LOST), None)


@pytest.mark.parametrize("stored", [
    {"text": "x", "interrupt_requested": True},  # someone asked it to stop
    {"text": "", "command": t.GOAL_TURN},  # the goal's next continuation is admitted afresh
])
def test_interrupted_and_goal_turns_end_cancelled_and_are_not_continued(stored):
    for archived in (False, True):
        assert t.host_lost("k1", stored, archived=archived, **LOST) == t.HostLost(
            rt.TurnCancelled(reason="host_lost"), None)


def test_a_continuation_s_parts_say_why_first_once():
    parts = [{"type": "text", "text": "look"}, {"type": "image", "data": "…"}]
    lost = t.host_lost("k1", {"text": "look", "parts": parts}, archived=False, **LOST)
    assert lost.continuation.parts == [{"type": "text", "text": t.RESUME_TEXT.rstrip()},
                                       *parts]
    again = t.host_lost("k1:resumed", {"text": lost.continuation.text,
                                       "parts": lost.continuation.parts},
                        archived=False, **LOST)
    assert again.continuation.parts == lost.continuation.parts
