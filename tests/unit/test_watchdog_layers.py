"""Watchdog limits in layers (session > provider > global > default) and their ranges, and
the tool idle limit of the turn clock, as pure logic."""

from runtimes.watchdog import (
    MAX_REPEAT_TOOL_CALL_LIMIT,
    MAX_TURN_HARD_CAP,
    TOOL_IDLE_TIMEOUT,
    TURN_HARD_CAP,
    TURN_IDLE_TIMEOUT,
    TurnClock,
    check_limits,
    resolve,
)


def _resolve(session=None, provider=None, global_=None):
    return resolve([("session", session), ("provider", provider), ("global", global_)])


def test_nothing_set_gives_the_defaults():
    values, sources = _resolve()
    assert values == {"turn_hard_cap_seconds": 21600, "turn_idle_timeout_seconds": 1800,
                      "tool_idle_timeout_seconds": 1800, "repeat_tool_call_limit": 50}
    assert set(sources.values()) == {"default"}


def test_session_beats_provider_beats_global():
    values, sources = _resolve(session={"turn_hard_cap_seconds": 10},
                               provider={"turn_hard_cap_seconds": 20,
                                         "repeat_tool_call_limit": 7},
                               global_={"turn_hard_cap_seconds": 30,
                                        "repeat_tool_call_limit": 8,
                                        "turn_idle_timeout_seconds": 99})
    assert values["turn_hard_cap_seconds"] == 10 and sources["turn_hard_cap_seconds"] == "session"
    assert values["repeat_tool_call_limit"] == 7
    assert sources["repeat_tool_call_limit"] == "provider"
    assert values["turn_idle_timeout_seconds"] == 99
    assert sources["turn_idle_timeout_seconds"] == "global"
    assert sources["tool_idle_timeout_seconds"] == "default"


def test_zero_disables_and_negative_restores_the_default_at_its_layer():
    values, sources = _resolve(session={"repeat_tool_call_limit": -1,
                                        "turn_hard_cap_seconds": 0},
                               provider={"repeat_tool_call_limit": 5},
                               global_={"turn_hard_cap_seconds": 60})
    assert values["repeat_tool_call_limit"] == 50 and sources["repeat_tool_call_limit"] == "default"
    assert values["turn_hard_cap_seconds"] == 0 and sources["turn_hard_cap_seconds"] == "session"


def test_null_leaves_the_limit_to_the_next_layer():
    values, sources = _resolve(session={"repeat_tool_call_limit": None},
                               global_={"repeat_tool_call_limit": 9})
    assert values["repeat_tool_call_limit"] == 9 and sources["repeat_tool_call_limit"] == "global"


def test_ranges_are_checked_per_field():
    clean, problems = check_limits({"turn_hard_cap_seconds": MAX_TURN_HARD_CAP + 1,
                                    "repeat_tool_call_limit": MAX_REPEAT_TOOL_CALL_LIMIT,
                                    "tool_idle_timeout_seconds": "10",
                                    "turn_idle_timeout_seconds": True,
                                    "mystery": 1})
    assert clean == {"repeat_tool_call_limit": 1000}
    assert set(problems) == {"turn_hard_cap_seconds", "tool_idle_timeout_seconds",
                             "turn_idle_timeout_seconds", "mystery"}
    assert "604800" in problems["turn_hard_cap_seconds"]
    assert check_limits({"repeat_tool_call_limit": 1001})[1] == {
        "repeat_tool_call_limit": "must be at most 1000"}
    assert check_limits([1])[1] == {"watchdog": "must be an object of limits"}
    assert check_limits({"turn_hard_cap_seconds": -5}) == ({"turn_hard_cap_seconds": -5}, {})


def test_a_running_tool_is_held_to_the_tool_idle_limit():
    clock = TurnClock(hard_cap=0, idle_timeout=100, started_at=0.0, tool_idle=10,
                      track_tools=True)
    clock.tool_started("t1")
    clock.touch(1.0)
    assert clock.next_deadline(1.0) == 10.0
    assert clock.expired(10.5) is None
    assert clock.expired(11.0) == TOOL_IDLE_TIMEOUT
    clock.touch(11.0)  # progress of the tool
    assert clock.expired(20.0) is None
    clock.tool_ended("t1")
    assert clock.expired(50.0) is None  # back to the turn idle limit
    assert clock.expired(111.0) == TURN_IDLE_TIMEOUT


def test_tool_idle_zero_leaves_a_tool_to_the_hard_cap():
    clock = TurnClock(hard_cap=500, idle_timeout=100, started_at=0.0, tool_idle=0,
                      track_tools=True)
    clock.tool_started("t1")
    assert clock.expired(400.0) is None
    assert clock.next_deadline(400.0) == 100.0
    assert clock.expired(500.0) == TURN_HARD_CAP


def test_without_tool_progress_tools_do_not_switch_limits():
    clock = TurnClock(hard_cap=0, idle_timeout=100, started_at=0.0, tool_idle=10,
                      track_tools=False)
    clock.tool_started("t1")
    assert clock.expired(50.0) is None
    assert clock.expired(100.0) == TURN_IDLE_TIMEOUT
