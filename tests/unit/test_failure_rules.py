"""Never stranded (pure rules): what a failure is, when a failed run is dispatched again,
what a `deliver` does without a session, and where a final notice goes."""

from datetime import UTC, datetime

import pytest

from tickets.core import failure as f
from tickets.core.errors import TicketEnded
from tickets.core.notices import parse_notice_channel
from tickets.core.stage import LABELS, Stage, StageFacts, derive, label

AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def facts(**kw):
    base = {"ticket": 7, "ended": False, "live_assignment": None, "last_state": "failed",
            "attempts": 1}
    return f.RunFacts(**(base | kw))


@pytest.mark.parametrize("cause", list(f.Cause))
def test_a_failed_run_is_dispatched_again_for_any_cause(cause):
    assert f.redispatch(facts(attempts=3), cause) == 4


@pytest.mark.parametrize("cause", [f.Cause.INPUT, f.Cause.SETTINGS])
def test_facts_leave_a_ticket_that_has_not_failed_alone(cause):
    assert f.redispatch(facts(last_state="running", live_assignment=3), cause) is None
    assert f.redispatch(facts(last_state="ended"), cause) is None
    assert f.redispatch(facts(last_state=None, attempts=0), cause) is None
    assert f.redispatch(facts(ended=True), cause) is None


def test_retry_says_why_it_does_nothing():
    with pytest.raises(f.NotFailed) as refused:
        f.redispatch(facts(last_state="dispatching", live_assignment=3), f.Cause.RETRY)
    assert refused.value.code == "not_failed" and refused.value.status == 409
    with pytest.raises(TicketEnded):
        f.redispatch(facts(ended=True), f.Cause.RETRY)
    with pytest.raises(f.NotFailed):
        f.redispatch(facts(last_state="ended"), f.Cause.RETRY)


def test_a_live_run_is_never_doubled():
    # A newer run is live although an older one failed: nothing new is dispatched.
    assert f.redispatch(facts(live_assignment=9, last_state="failed"), f.Cause.INPUT) is None


def test_a_deliver_posts_waits_only_for_a_dispatch_in_flight_else_gives_up():
    assert f.delivery(has_session=True, ended=False, live_assignment=None) is f.Delivery.POST
    # a run being started: its brief goes into the session before any input
    assert f.delivery(has_session=True, ended=False, live_assignment=4,
                      briefed=False) is f.Delivery.WAIT
    assert f.delivery(has_session=True, ended=False, live_assignment=4,
                      briefed=True) is f.Delivery.POST
    assert f.delivery(has_session=False, ended=False, live_assignment=4) is f.Delivery.WAIT
    assert f.delivery(has_session=False, ended=False,
                      live_assignment=None) is f.Delivery.UNDELIVERABLE
    assert f.delivery(has_session=False, ended=True,
                      live_assignment=4) is f.Delivery.UNDELIVERABLE


def test_failures_are_kept_whole_with_a_code():
    long = "x" * 500
    assert f.dispatch_failure("settings", long) == f.Failure("settings_missing", long)
    assert f.dispatch_failure("session", "no such runtime", "unknown_runtime").code == \
        "unknown_runtime"
    # the session layer's generic codes say nothing: a dispatch error
    assert f.dispatch_failure("session", "model is required", "invalid").code == \
        "dispatch_error"
    assert f.turn_failure("", "").code == "turn_failed"
    assert f.turn_failure("provider_error", "401").message == "401"
    assert "model provider" in f.turn_failure("provider_error").message


def test_the_last_failure_is_only_a_failed_runs():
    assert f.last_failure("ended", "", "", AT) is None
    assert f.last_failure("failed", "turn_idle_timeout", "silent 600 s", AT).as_dict() == {
        "code": "turn_idle_timeout", "message": "silent 600 s", "at": AT.isoformat()}
    assert f.reason("turn_idle_timeout") == "a watchdog stopped a turn that went silent"
    # a run failed before codes were kept shows its short end reason
    legacy = f.last_failure("failed", "", "", AT, legacy_reason="no worker provider and m")
    assert legacy.code == legacy.message == "no worker provider and m"


def test_undelivered_reasons_name_the_failure():
    failure = f.Failure("settings_missing", "configure a worker model")
    why = f.undelivered_reason(failure, ended=False)
    assert "agent settings are not filled in" in why and "configure a worker model" in why
    assert f.undelivered_reason(None, ended=True) == "the ticket has ended"


def test_a_failed_ticket_label_names_its_reason():
    stage_facts = StageFacts(assignment="failed", failure="settings_missing")
    stage = derive(stage_facts)
    assert stage is Stage.FAILED
    assert label(stage, stage_facts) == "Failed — agent settings are not filled in"
    odd = StageFacts(assignment="failed", failure="rate_limited")
    assert label(derive(odd), odd) == "Failed — rate limited"
    # a failed report (the run still going) keeps the plain label
    reported = StageFacts(assignment="running", latest_report="failed")
    assert label(derive(reported), reported) == LABELS[Stage.FAILED]
    # once a person spoke after the failure, the ticket is no longer shown failed
    spoke = StageFacts(assignment="failed", failure="settings_missing",
                       person_spoke_since_report=True)
    assert derive(spoke) is Stage.QUEUED


@pytest.mark.parametrize("value,expected", [
    ("team:general", ("team", "general")),
    ("lark-main:oc_123abc", ("lark-main", "oc_123abc")),
    (" chat:room-1 ", ("chat", "room-1")),
    ("", None), (None, None), ("nochannel", None), ("a b:c", None), (":x", None), (3, None),
])
def test_notice_channels_parse(value, expected):
    assert parse_notice_channel(value) == expected
