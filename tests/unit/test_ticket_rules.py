from datetime import UTC, datetime

import pytest

from tickets.core import rules
from tickets.core.errors import InvalidCommand, TicketEnded

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def test_short_names_are_readable_and_directory_safe():
    assert rules.short_name(42, "Fix the login crash!") == "t42-fix-the-login-crash"
    assert rules.short_name(7, "修复登录") == "t7"
    assert "/" not in rules.short_name(1, "../../etc/passwd")


def test_stopping_tells_the_live_assignment_with_a_key_of_its_own():
    plan = rules.stop(rules.TicketView(id=3, ended=False, live_assignment=9), by="op", now=NOW)
    assert plan.changes == {"ended_at": NOW, "end_reason": "stopped"}
    (effect,) = plan.effects
    assert effect.kind == "dispatch" and effect.key == "assignment:9:stop"
    assert effect.key != rules.dispatch(9, 3).key  # never coalesced with the dispatch


def test_an_ended_ticket_cannot_be_stopped_or_given_input():
    ended = rules.TicketView(id=3, ended=True)
    with pytest.raises(TicketEnded):
        rules.stop(ended, by="op", now=NOW)
    with pytest.raises(TicketEnded):
        rules.add_input(ended, text="hello")


def test_empty_or_huge_input_is_refused():
    live = rules.TicketView(id=3, ended=False)
    with pytest.raises(InvalidCommand):
        rules.add_input(live, text="  ")
    with pytest.raises(InvalidCommand):
        rules.add_input(live, text="x" * (rules.MAX_INPUT_CHARS + 1))
