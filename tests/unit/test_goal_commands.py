"""The goal commands: exactly the seed's words, only at the very start of a message."""

import pytest

from sessions.native_goal_commands import MAX_BUDGET, GoalCommand, parse


@pytest.mark.parametrize("text, expected", [
    ("goal", GoalCommand("status")),
    ("goal   ", GoalCommand("status")),
    ("goal\n", GoalCommand("status")),
    ("goal pause", GoalCommand("pause")),
    ("goal resume", GoalCommand("resume")),
    ("goal clear", GoalCommand("clear")),
    ("goal  clear  ", GoalCommand("clear")),
    ("goal Pause", GoalCommand("pause")),
    ("goal write the release notes", GoalCommand("create", text="write the release notes")),
    ("goal 把测试补齐", GoalCommand("create", text="把测试补齐")),
    ("goal\nfix the flaky test\nand the docs",
     GoalCommand("create", text="fix the flaky test\nand the docs")),
    ("goal set ship v2", GoalCommand("set", text="ship v2")),
    ("goal set   ship v2  ", GoalCommand("set", text="ship v2")),
    ("goal budget 200000", GoalCommand("budget", budget=200000)),
    ("goal budget 1", GoalCommand("budget", budget=1)),
    # a verb followed by more words is the objective of a new goal, as written
    ("goal pause the deploy pipeline", GoalCommand("create", text="pause the deploy pipeline")),
    ("goal clear the backlog", GoalCommand("create", text="clear the backlog")),
])
def test_commands(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize("text", [
    "/goal", "/goal write docs", "/goal pause", "goals", "goal:", "goal:write", "goalkeeper",
    " goal", " goal pause", "\ngoal", "my goal is x", "Goal pause", "GOAL", "please goal x",
    "", None,
])
def test_ordinary_text(text):
    assert parse(text) is None


@pytest.mark.parametrize("text", [
    "goal budget", "goal budget 0", "goal budget -5", "goal budget 1.5", "goal budget lots",
    "goal budget 10k", "goal budget 1e6", "goal budget 100 tokens", "goal budget +100",
    f"goal budget {MAX_BUDGET + 1}", "goal budget ５",
])
def test_bad_budget_is_refused_with_the_usage(text):
    command = parse(text)
    assert command.verb == "budget" and command.budget is None
    assert "positive whole number of tokens" in command.error


def test_set_without_text_is_refused():
    for text in ("goal set", "goal set   "):
        command = parse(text)
        assert command.verb == "set" and command.error and "goal set <text>" in command.error


def test_well_formed_commands_carry_no_error():
    for text in ("goal", "goal x", "goal set y", "goal budget 5", "goal pause"):
        assert parse(text).error is None
