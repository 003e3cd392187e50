"""What the runtime reports about a goal reaches the timeline only when it changes
something: a "cleared" report for a goal the session never had (Codex sends one when a
thread is resumed) is no news, and must not become a "Goal cleared" card in a chat."""

from __future__ import annotations

import pytest

from sessions import native_goals, services
from sessions.models import TimelineEvent
from sessions.new_session import Launch

pytestmark = pytest.mark.django_db

NATIVE = {"objective": "ship it", "status": "active", "tokensUsed": 0, "updatedAt": 1}


def _goal_events(sid):
    return list(TimelineEvent.objects.filter(session_id=sid, type__startswith="goal.")
                .order_by("seq").values_list("type", flat=True))


def test_a_cleared_report_for_no_goal_is_not_recorded(openai_provider, session_dirs):
    sid = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                model="gpt-5.5")).pk
    native_goals.record(sid, None, cleared=True)
    assert _goal_events(sid) == []


def test_a_goal_the_runtime_cleared_is_recorded_once(openai_provider, session_dirs):
    sid = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                model="gpt-5.5")).pk
    native_goals.record(sid, NATIVE)
    native_goals.record(sid, None, cleared=True)
    native_goals.record(sid, None, cleared=True)  # repeated on the next resume: nothing new
    assert _goal_events(sid) == ["goal.updated", "goal.cleared"]


def test_a_clear_command_is_always_answered(openai_provider, session_dirs):
    """A person's `goal clear` gets its answer even when there was nothing to clear."""
    sid = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                model="gpt-5.5")).pk
    native_goals.record(sid, None, command="clear", cleared=True)
    assert _goal_events(sid) == ["goal.cleared"]
