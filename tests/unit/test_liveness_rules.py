"""A source's and a connector's state are derived from facts (intake/liveness_rules.py,
goals/core/connectors.py live_state): one test per rule an operator would name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from goals.core.connectors import live_state
from intake.liveness_rules import Beat, source_state

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
CREATED = NOW - timedelta(days=30)


def state(**kw):
    args = {"enabled": True, "long_connection": True, "beat": None, "last_event_at": None,
            "provider": None, "expected_interval": 86400, "receiver_timeout": 60,
            "created_at": CREATED, "now": NOW, **kw}
    return source_state(**args)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def test_a_long_connection_that_never_beat_is_stale_receiver_down():
    live = state()
    assert (live.state, live.reason) == ("stale", "receiver_down")


def test_a_beating_connected_receiver_is_listening_however_quiet_the_chat():
    live = state(beat=Beat(ago(10), True, ago(3600)), last_event_at=ago(30 * 86400))
    assert (live.state, live.reason, live.since) == ("listening", "", ago(3600))


def test_beats_that_stopped_make_it_stale_since_the_timeout_ran_out():
    live = state(beat=Beat(ago(61), True, ago(3600)))
    assert (live.state, live.reason, live.since) == ("stale", "receiver_down", ago(1))


def test_an_event_is_as_good_as_a_beat():
    live = state(beat=Beat(ago(300), True, ago(3600)), last_event_at=ago(5))
    assert live.state == "listening"


def test_a_receiver_beating_without_its_connection_is_stale():
    live = state(beat=Beat(ago(5), False, ago(40)))
    assert (live.state, live.reason, live.since) == ("stale", "receiver_not_connected",
                                                     ago(40))


def test_a_webhook_source_is_listening_while_events_arrive_within_its_interval():
    webhook = {"long_connection": False, "expected_interval": 3600}
    assert state(**webhook, last_event_at=ago(3599)).state == "listening"
    live = state(**webhook, last_event_at=ago(3700))
    assert (live.state, live.reason, live.since) == ("stale", "no_events_within_interval",
                                                     ago(100))
    # a new source is given its interval from its creation
    assert state(**webhook, created_at=ago(10)).state == "listening"


def test_an_interval_of_zero_never_judges_a_webhook_source_by_quietness():
    live = state(long_connection=False, expected_interval=0)
    assert (live.state, live.since) == ("listening", CREATED)


def test_the_provider_and_the_operator_disconnect():
    said = {"state": "disconnected", "reason": "credentials_refused", "at": ago(50).isoformat()}
    live = state(beat=Beat(ago(1), True, ago(10)), provider=said)
    assert (live.state, live.reason, live.since) == ("disconnected", "credentials_refused",
                                                     ago(50))
    assert state(enabled=False).reason == "source_disabled"


def connector(**kw):
    args = {"detached": False, "detached_at": ago(5), "source_kind": "lark_group_message",
            "has_source": True, "source_state": ("listening", "", ago(60)),
            "removed_chats": {}, "source_ref": "oc_team", "created_at": CREATED, **kw}
    return live_state(**args)


def test_a_connector_shows_its_sources_state():
    assert connector() == ("listening", "", ago(60))
    assert connector(source_state=("stale", "receiver_down", ago(1)))[:2] == (
        "stale", "receiver_down")


def test_a_connector_is_disconnected_when_detached_or_the_bot_left_its_chat():
    assert connector(detached=True) == ("disconnected", "detached", ago(5))
    assert connector(removed_chats={"oc_team": "2026-12-06T11:00:00+00:00"}) == (
        "disconnected", "bot_removed_from_chat", "2026-12-06T11:00:00+00:00")
    # the bot left another chat: this one still listens
    assert connector(removed_chats={"oc_other": "x"})[0] == "listening"


def test_a_web_chat_connector_is_connected():
    assert connector(source_kind="web_chat", has_source=False, source_state=None) == (
        "connected", "", CREATED)
