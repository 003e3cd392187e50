"""The guards' rules (tickets/core/guards.py) and how a usage report counts toward a day
(sessions/usage.py): pure, the clock passed in."""

from datetime import UTC, datetime, timedelta

from sessions import usage
from tickets.core import guards
from tickets.core.guards import Caps, Spend, Waiver
from tickets.core.stage import Stage, StageFacts, derive, label

NOW = datetime(2026, 12, 1, 9, 40, tzinfo=UTC)


def test_no_cap_when_caps_are_zero():
    spend = Spend(ticket_tokens=10**12, day_tokens=10**12, sent_this_hour=10**6, held=0)
    assert guards.reached(Caps(), spend, NOW) is None
    assert guards.may_send(Caps(), spend)


def test_ticket_cap_reached_at_the_cap_and_never_resets_by_itself():
    caps = Caps(ticket_tokens=1000, daily_tokens=10**9)
    assert guards.reached(caps, Spend(ticket_tokens=999), NOW) is None
    found = guards.reached(caps, Spend(ticket_tokens=1000), NOW)
    assert found.cap == guards.TICKET_TOKENS and found.until is None
    assert found.text == "the ticket's token cap (1,000) is reached"


def test_daily_cap_names_the_cap_and_resets_at_midnight_utc():
    caps = Caps(daily_tokens=2_000_000)
    found = guards.reached(caps, Spend(day_tokens=2_000_001), NOW)
    assert found.text == "the daily token cap (2,000,000) is reached"
    assert found.until == datetime(2026, 12, 2, tzinfo=UTC)
    assert guards.retry_in(found, NOW) == 300.0
    assert guards.retry_in(found, datetime(2026, 12, 1, 23, 59, 30, tzinfo=UTC)) == 30.0


def test_ticket_cap_wins_over_daily_cap():
    caps = Caps(ticket_tokens=10, daily_tokens=10)
    assert guards.reached(caps, Spend(ticket_tokens=10, day_tokens=10), NOW).cap == \
        guards.TICKET_TOKENS


def test_retry_waives_only_the_cap_that_blocked_one_more_caps_worth():
    caps = Caps(ticket_tokens=1000, daily_tokens=5000, messages_per_hour=2)
    spend = Spend(ticket_tokens=1200, day_tokens=5100)
    found = guards.reached(caps, spend, NOW)
    waiver = guards.waive(found, spend, NOW, Waiver())
    assert waiver == Waiver(ticket_tokens=1200)
    # the daily cap was not waived: it blocks next
    assert guards.reached(caps, spend, NOW, waiver).cap == guards.DAILY_TOKENS
    waiver = guards.waive(guards.reached(caps, spend, NOW, waiver), spend, NOW, waiver)
    assert waiver == Waiver(ticket_tokens=1200, day=NOW.date(), day_tokens=5100)
    assert guards.reached(caps, Spend(ticket_tokens=2100, day_tokens=9000), NOW, waiver) is None
    assert guards.reached(caps, Spend(ticket_tokens=2200), NOW, waiver).cap == \
        guards.TICKET_TOKENS
    # the day's waiver ends with the day: the next day counts from zero
    tomorrow = NOW + timedelta(days=1)
    assert guards.reached(caps, Spend(ticket_tokens=1500, day_tokens=5000), tomorrow,
                          waiver).cap == guards.DAILY_TOKENS
    held = guards.reached(caps, Spend(sent_this_hour=2, held=1), NOW)
    assert guards.waive(held, spend, NOW, waiver) == Waiver(
        ticket_tokens=1200, day=NOW.date(), day_tokens=5100, messages_at=NOW)
    assert Waiver.from_dict(Waiver(1, NOW.date(), 2, NOW).as_dict()) == Waiver(1, NOW.date(),
                                                                             2, NOW)
    assert Waiver.from_dict({}) == Waiver()


def test_message_cap_sends_up_to_the_cap_then_holds_in_order():
    caps = Caps(messages_per_hour=3)
    assert guards.may_send(caps, Spend(sent_this_hour=2))
    assert not guards.may_send(caps, Spend(sent_this_hour=3))
    # a held message goes first: nothing overtakes it, even with room
    assert not guards.may_send(caps, Spend(sent_this_hour=0, held=1))


def test_message_cap_blocks_only_while_a_message_is_held():
    caps = Caps(messages_per_hour=3)
    assert guards.reached(caps, Spend(sent_this_hour=3), NOW) is None
    found = guards.reached(caps, Spend(sent_this_hour=3, held=2), NOW)
    assert found.cap == guards.HOURLY_MESSAGES
    assert found.text == "the hourly message cap (3) is reached; 2 messages held"
    assert found.until == datetime(2026, 12, 1, 10, tzinfo=UTC)


def test_held_messages_released_as_the_new_hour_has_room():
    caps = Caps(messages_per_hour=3)
    assert guards.releasable(caps, Spend(sent_this_hour=3, held=5)) == 0
    assert guards.releasable(caps, Spend(sent_this_hour=0, held=5)) == 3
    assert guards.releasable(caps, Spend(sent_this_hour=1, held=1)) == 1
    assert guards.releasable(Caps(), Spend(sent_this_hour=99, held=4)) == 4  # cap removed
    # with the held ones released within the hour's room, nothing blocks
    assert guards.reached(caps, Spend(sent_this_hour=0, held=2), NOW) is None


def test_windows_are_utc():
    local = datetime(2026, 12, 2, 0, 30, tzinfo=UTC).astimezone(
        __import__("zoneinfo").ZoneInfo("Asia/Shanghai"))
    assert guards.day_start(local) == datetime(2026, 12, 2, tzinfo=UTC)
    assert guards.hour_start(local) == datetime(2026, 12, 2, 0, tzinfo=UTC)


def test_stage_a_cap_blocks_first_after_ended():
    facts = StageFacts(cap="the daily token cap (2,000,000) is reached", open_question=True,
                       assignment="running")
    stage = derive(facts)
    assert stage is Stage.BLOCKED
    assert label(stage, facts) == "Blocked — the daily token cap (2,000,000) is reached"
    assert derive(StageFacts(cap="x", ended=True)) is Stage.ENDED
    assert label(Stage.BLOCKED, StageFacts(latest_report="blocked")) == "Blocked — needs a person"


def test_usage_increase_from_a_native_cumulative_figure():
    first = {"cumulative": {"cumulative_total_tokens": 300}}
    assert usage.increase({}, first, native_cumulative=True) == 300
    later = {"cumulative": {"cumulative_total_tokens": 450}}
    assert usage.increase(first, later, native_cumulative=True) == 150
    # the per-call figure of such a runtime is not counted again
    assert usage.increase(later, {"last": {"total_tokens": 70}}, native_cumulative=True) == 0
    # the runtime started counting again: the new figure counts whole
    assert usage.increase(later, {"cumulative": {"cumulative_total_tokens": 40}}, True) == 40


def test_usage_increase_from_per_call_figures_and_totals_without_a_total():
    assert usage.increase({}, {"last": {"input_tokens": 12, "output_tokens": 5}}, False) == 17
    assert usage.increase({}, {"context_used": 999}, False) == 0
    assert usage.cumulative_total({"cumulative": {"cumulative_input_tokens": 3,
                                                  "cumulative_output_tokens": 4}}) == 7
    assert usage.cumulative_total(None) is None
