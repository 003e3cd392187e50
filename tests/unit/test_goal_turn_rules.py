"""loopx_turn_v0's pure rules (goals/core/turns.py): gate, todo selection, spend, hint and
whether the supervisor starts another turn."""

import pytest

from goals.core import turns as rules
from goals.core.lifecycle import Refused

ME, OTHER = 1, 2


def todo(id_, state="open", by=None):
    return rules.TodoFact(id_, state, by)


@pytest.mark.parametrize(("goal_state", "remaining", "has_check", "expected"), [
    ("active", 3, True, None),
    ("paused", 3, True, rules.Skip("goal_paused", "stop")),
    ("done", 3, True, rules.Skip("goal_done", "stop")),
    ("active", 0, True, rules.Skip("quota_exhausted", "stop")),
    ("active", 3, False, rules.Skip("no_check_command", "replan")),
])
def test_turn_gate(goal_state, remaining, has_check, expected):
    assert rules.gate(goal_state=goal_state, quota_remaining=remaining,
                      has_check=has_check) == expected


def test_select_takes_the_oldest_open_or_own_claim():
    todos = [todo(5), todo(3, "claimed", OTHER), todo(4, "claimed", ME), todo(1, "done")]
    assert rules.select_todo(todos, ME, None) == todo(4, "claimed", ME)
    assert rules.select_todo([todo(7), todo(6)], ME, None) == todo(6)


def test_select_without_work_says_wait_or_stop():
    assert rules.select_todo([todo(1, "claimed", OTHER)], ME, None) == rules.Skip(
        "todos_claimed_by_others", "wait")
    assert rules.select_todo([todo(1, "done"), todo(2, "dropped")], ME, None) == rules.Skip(
        "no_open_todos", "stop")


def test_select_a_named_todo_refuses_naming_todo():
    todos = [todo(1), todo(2, "claimed", OTHER), todo(3, "done")]
    assert rules.select_todo(todos, ME, 1) == todo(1)
    with pytest.raises(Refused) as unknown:
        rules.select_todo(todos, ME, 9)
    assert (unknown.value.status, unknown.value.field) == (400, "todo")
    for taken in (2, 3):
        with pytest.raises(Refused) as busy:
            rules.select_todo(todos, ME, taken)
        assert (busy.value.status, busy.value.field, busy.value.code) == (
            409, "todo", "todo_unavailable")


@pytest.mark.parametrize("key", ["", "a b", "x/y", "é", "k" * 101, 7, None])
def test_a_key_names_a_turn_in_a_url(key):
    with pytest.raises(Refused) as refused:
        rules.check_key(key)
    assert refused.value.field == "key"


def test_spend_only_for_a_passed_accepted_writeback():
    assert rules.charges(passed=True, writeback_accepted=True)
    assert not rules.charges(passed=False, writeback_accepted=True)
    assert not rules.charges(passed=True, writeback_accepted=False)
    assert rules.spend_amount("turns", 900) == 1
    assert rules.spend_amount("tokens", 900) == 900


@pytest.mark.parametrize(("facts", "expected"), [
    (dict(passed=True, writeback_accepted=True, todos=[todo(2)]), "continue"),
    (dict(passed=True, writeback_accepted=True, todos=[todo(1, "done")]), "stop"),
    (dict(passed=True, writeback_accepted=True, todos=[todo(2, "claimed", OTHER)]), "wait"),
    (dict(passed=False, writeback_accepted=True, todos=[todo(1, "claimed", ME)]), "replan"),
    (dict(passed=True, writeback_accepted=False, todos=[todo(2)]), "wait"),
    (dict(passed=True, writeback_accepted=True, todos=[todo(2)], quota_remaining=0), "stop"),
    (dict(passed=True, writeback_accepted=True, todos=[todo(2)], goal_state="paused"),
     "stop"),
])
def test_hint_after_a_turn(facts, expected):
    facts = {"goal_state": "active", "quota_remaining": 2, "agent": ME, **facts}
    assert rules.hint_after(**facts) == expected


def test_the_supervisor_starts_a_turn_only_after_continue_and_when_told_to():
    base = dict(autorun=True, managed=True, live=True, goal_state="active", quota_remaining=1,
                in_flight=False, last_hint="continue")
    assert rules.supervise_next(**base)
    assert rules.supervise_next(**{**base, "last_hint": None})
    for change in ({"autorun": False}, {"managed": False}, {"live": False},
                   {"goal_state": "paused"}, {"quota_remaining": 0}, {"in_flight": True},
                   {"last_hint": "replan"}, {"last_hint": "wait"}, {"last_hint": "stop"}):
        assert not rules.supervise_next(**{**base, **change}), change


def test_check_output_keeps_its_tail():
    assert rules.cap("short") == "short"
    capped = rules.cap("x" * 10 + "verdict", limit=7)
    assert capped.endswith("verdict") and "10 earlier characters cut" in capped


# ------------------------------------------------------------------------------ cancel
@pytest.mark.parametrize("state, requested, running, step", [
    ("queued", False, False, "end"),          # nothing posted yet
    ("running", False, True, "interrupt"),    # its session turn runs: interrupt it
    ("running", False, False, "end"),         # its session turn ended, not validated yet
    ("validated", False, False, "end"),       # checked, nothing written
    ("running", True, True, "same"),          # asked already: the same answer again
    ("cancelled", True, False, "same"),
])
def test_what_a_cancel_does_at_each_state(state, requested, running, step):
    assert rules.cancel_step(state, cancel_requested=requested,
                             attempt_running=running) == step


@pytest.mark.parametrize("state, code", [("done", "turn_settled"),
                                         ("skipped", "turn_settled"),
                                         ("written", "turn_written")])
def test_a_settled_or_written_turn_is_not_cancelled_and_the_refusal_names_its_state(
        state, code):
    with pytest.raises(Refused) as refused:
        rules.cancel_step(state, cancel_requested=False, attempt_running=False)
    assert (refused.value.status, refused.value.code) == (409, code)
    assert state in str(refused.value)


def test_a_cancelled_turn_is_settled_and_its_hint_stops_the_supervisor():
    assert rules.CANCELLED in rules.SETTLED and rules.CANCELLED not in rules.IN_FLIGHT
    assert rules.CANCEL_HINT == "stop"
    assert not rules.supervise_next(autorun=True, managed=True, live=True,
                                    goal_state="active", quota_remaining=3,
                                    in_flight=False, last_hint=rules.CANCEL_HINT)
