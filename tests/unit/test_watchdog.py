"""Watchdog rules of seed 000, as pure logic."""

from runtimes.watchdog import (
    MAX_TURN_HARD_CAP,
    TURN_HARD_CAP,
    TURN_IDLE_TIMEOUT,
    RepeatToolCounter,
    TurnClock,
    WatchdogConfig,
    normalize_hard_cap,
    normalize_repeat_limit,
)


def test_hard_cap_defaults_disables_and_clamps():
    assert normalize_hard_cap(None) == 21600
    assert normalize_hard_cap(-1) == 21600
    assert normalize_hard_cap(0) == 0
    assert normalize_hard_cap(60) == 60
    assert normalize_hard_cap(10**9) == MAX_TURN_HARD_CAP == 7 * 24 * 3600


def test_repeat_limit_defaults_disables_and_clamps():
    assert normalize_repeat_limit(None) == 50
    assert normalize_repeat_limit(-5) == 50
    assert normalize_repeat_limit(0) == 0
    assert normalize_repeat_limit(5000) == 1000


def test_settings_are_normalized():
    cfg = WatchdogConfig.from_settings({"turn_hard_cap_seconds": -3,
                                        "repeat_tool_call_limit": 2000})
    assert cfg.turn_hard_cap_seconds == 21600 and cfg.repeat_tool_call_limit == 1000


def test_identical_calls_trip_at_the_limit():
    counter = RepeatToolCounter(limit=3)
    assert not counter.observe("a", "ls")
    assert not counter.observe("b", "ls")
    assert counter.observe("c", "ls")


def test_repeated_frames_of_one_call_do_not_count():
    counter = RepeatToolCounter(limit=2)
    assert not counter.observe("a", "ls")
    assert not counter.observe("a", "ls")
    assert counter.count == 1


def test_a_different_call_resets_and_new_turn_resets():
    counter = RepeatToolCounter(limit=3)
    counter.observe("a", "ls")
    counter.observe("b", "ls")
    counter.observe("c", "pwd")
    assert counter.count == 1
    counter.reset()
    assert counter.count == 0


def test_zero_limit_disables():
    counter = RepeatToolCounter(limit=0)
    assert not any(counter.observe(str(i), "ls") for i in range(2000))


def test_clock_hard_cap_and_idle_with_pause():
    clock = TurnClock(hard_cap=100, idle_timeout=10, started_at=0.0)
    assert clock.expired(5) is None
    assert clock.expired(10) == TURN_IDLE_TIMEOUT
    clock.touch(10)
    clock.pause()
    assert clock.expired(50) is None  # idle paused (tool running / permission pending)
    assert clock.expired(100) == TURN_HARD_CAP
    clock.resume(60)
    assert clock.next_deadline(60) == 10


def test_disabled_clock_has_no_deadline():
    clock = TurnClock(hard_cap=0, idle_timeout=0, started_at=0.0)
    assert clock.expired(10**9) is None and clock.next_deadline(5) is None
