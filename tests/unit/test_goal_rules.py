"""goals/core: mode selection with fallback, lifecycle and todo transitions, connector
capabilities, urgency projection and quota arithmetic (pure, no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from goals.core import connectors, ingress, lifecycle, quota, urgency
from goals.core.lifecycle import Refused

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _decide(mode, session="live", fallback="none", queue_length=0, addressed=True,
            scope="mentions", place=True):
    return ingress.decide(capture_scope=scope, ingress_mode=mode, fallback=fallback,
                          addressed=addressed, place_matches=place, session=session,
                          queue_length=queue_length)


def test_each_event_gets_exactly_one_effective_mode():
    assert _decide("live_steering") == ingress.Decision("delivered", "live_steering",
                                                        False, "")
    assert _decide("live_steering", "session_stale") == ingress.Decision(
        "refused", "", False, "session_stale")
    assert _decide("live_steering", "no_session", "session_queue") == ingress.Decision(
        "refused", "", True, "no_session")  # a queue needs a known session too
    assert _decide("live_steering", "session_terminal", "async_inbox") == ingress.Decision(
        "inboxed", "async_inbox", True, "session_terminal")
    assert _decide("session_queue") == ingress.Decision("queued", "session_queue", False, "")
    assert _decide("session_queue", queue_length=ingress.QUEUE_MAX).reason == "queue_full"
    assert _decide("async_inbox", "no_session").outcome == "inboxed"


def test_admission_comes_before_delivery():
    assert _decide("live_steering", addressed=False).reason == "not_addressed"
    assert _decide("live_steering", addressed=False, scope="configured_chat_all").outcome \
        == "delivered"
    assert _decide("async_inbox", place=False).reason == "topic_mismatch"


def test_queue_items_expire_after_the_ttl():
    assert not ingress.expired(NOW, NOW + ingress.QUEUE_TTL - timedelta(seconds=1))
    assert ingress.expired(NOW, NOW + ingress.QUEUE_TTL)


def test_transitions():
    assert lifecycle.todo_transition("open", "claimed", "") == "claimed"
    with pytest.raises(Refused) as refused:
        lifecycle.todo_transition("claimed", "done", " ")
    assert refused.value.field == "evidence"
    with pytest.raises(Refused):
        lifecycle.todo_transition("done", "open", "x")
    with pytest.raises(Refused) as active:
        lifecycle.mode_change(lifecycle.MANAGED, lifecycle.ATTACHED, True)
    assert active.value.code == "session_active"
    assert lifecycle.mode_change(lifecycle.MANAGED, lifecycle.ATTACHED, False) == \
        lifecycle.ATTACHED


def test_lifecycle_projection_from_session_facts():
    def project(**facts):
        base = {"bound": True, "session_archived": False, "turn_running": False,
                "waiting_for_person": False, "last_turn_cancelled": False}
        return lifecycle.project_lifecycle("ready", **{**base, **facts})

    assert project() == "ready"
    assert project(turn_running=True) == "running"
    assert project(turn_running=True, waiting_for_person=True) == "waiting"
    assert project(last_turn_cancelled=True) == "interrupted"
    assert project(session_archived=True) == "stale"
    assert project(bound=False) == "terminal"


def test_capabilities_table_refuses_what_a_kind_cannot_do():
    with pytest.raises(Refused) as reply:
        connectors.check(source_kind="web_chat", provider_kind=None, capture_scope="mentions",
                         ingress_mode="live_steering", fallback="none",
                         reply_mode="source_thread")
    assert reply.value.field == "reply_mode"
    with pytest.raises(Refused) as fallback:
        connectors.check(source_kind="lark_group_message", provider_kind="lark",
                         capture_scope="mentions", ingress_mode="session_queue",
                         fallback="async_inbox", reply_mode="none")
    assert fallback.value.field == "fallback"
    needs = connectors.permission_requirements(
        "lark_group_message", domain="https://open.larksuite.com", app_id="cli_x",
        capture_scope="mentions", reply_mode="none")
    assert {n["capability"] for n in needs} == {"live_delivery", "history_catch_up"}
    assert needs[0]["repair_url"] == "https://open.larksuite.com/app/cli_x/auth"


def test_urgency_counts_without_content():
    events = [("message", NOW - timedelta(seconds=90)), ("question", NOW - timedelta(seconds=5))]
    assert urgency.project(events, NOW) == {"pending": 2, "questions": 1, "mentions": 0,
                                            "replies": 0, "oldest_age_s": 90,
                                            "reply_due": True}
    assert urgency.project([("reply", NOW)], NOW)["reply_due"] is False


def test_quota_arithmetic():
    assert quota.spend(5, 4, 1) == 5
    with pytest.raises(Refused) as exhausted:
        quota.spend(5, 5, 1)
    assert exhausted.value.code == "quota_exhausted"
    assert quota.remaining(5, 7) == 0
    with pytest.raises(Refused):
        quota.check("turns", 2, 3)
