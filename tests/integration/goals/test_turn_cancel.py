"""Cancelling a managed turn (POST goals/<g>/agents/<a>/turns/<key>/cancel) with the real
Pi against the scripted model server: a turn in flight is interrupted through the session's
own interrupt path (the host, via Redis) and ends ``cancelled`` — nothing written back,
nothing spent, hint ``stop``; a settled turn answers 409 naming its state, an unknown key
404; the same cancel again answers the same; no replay, and no host lost meanwhile, brings
a cancelled turn back."""

from __future__ import annotations

import re
import threading

import pytest
from django.test import Client

from goals import turns
from goals.models import GoalTurn
from sessions import timeline
from sessions.models import TimelineEvent, Turn
from tests.support.model_server import Text
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(120)]

TURNS = "/api/v1/goals/ship/agents/builder/turns/"
GOAL = "/api/v1/goals/ship/"


@pytest.fixture
def ready(api, session_id):
    """A passing check and one todo: left alone, a turn would be accepted and spend one."""
    assert api.patch(GOAL, {"check_command": "true"}).status_code == 200
    response = api.post("/api/v1/goals/ship/todos/", {"title": "write done.txt"})
    assert response.status_code == 201
    return response.json()["id"]


def cancel(api, key):
    return api.post(TURNS + f"{key}/cancel")


def assert_cancelled(api, key, todo):
    body = api.get(TURNS + f"{key}/").json()
    assert (body["state"], body["reason"], body["hint"]) == ("cancelled", "cancelled", "stop")
    assert body["quota_spent"] == 0
    assert body["writeback"] == {"accepted": False, "reason": "cancelled"}
    assert body["validation"]["passed"] is None  # amux's check never ran
    assert api.get(GOAL).json()["quota"]["spent"] == 0
    kept = api.get(f"/api/v1/goals/ship/todos/{todo}/").json()
    assert (kept["state"], kept["claimed_by"], kept["evidence"]) == ("claimed", "builder", "")
    return body


def goal_page(user):
    client = Client()
    client.force_login(user)
    return client, client.get("/panel/sessions/goals/ship/").content.decode()


def turn_row(html, key):
    start = html.index(f'data-turn="{key}"')
    return html[start:html.index("</tr>", start)]


def test_cancelling_a_running_turn_interrupts_its_session_turn(api, ready, session_id,
                                                               model_server, operator):
    model_server.script(Text("still thinking", delay=30))
    assert api.post(TURNS, {"key": "slow"}).status_code == 202
    pk = GoalTurn.objects.get(key="slow").pk
    assert turns.advance(pk).state == "running"
    result = {}
    host = threading.Thread(target=lambda: result.setdefault("outcome", run_host(session_id)))
    host.start()
    try:
        model_server.wait_for_requests(1, timeout=60)
        wait_for(lambda: timeline.turn_in_flight(session_id))
        assert 'data-action="cancel-turn"' in turn_row(goal_page(operator)[1], "slow")
        asked = cancel(api, "slow")
        # its session turn is still ending: the envelope stays in flight until it has
        assert asked.status_code in (200, 202), asked.content
        assert asked.json()["attempt"]["cancel_requested"] is True
        assert asked.json()["attempt"]["interrupted"] is True
        wait_for(lambda: Turn.objects.get(session_id=session_id, key="loopx-slow").state
                 == "cancelled", timeout=30)
    finally:
        host.join(60)
    assert result["outcome"] == "slept"
    assert turns.advance(pk).state == "cancelled"  # what the supervisor task runs next
    body = assert_cancelled(api, "slow", ready)
    assert body["attempt"]["turn_state"] == "cancelled"
    assert list(TimelineEvent.objects.filter(
        session_id=session_id, type__in=["turn.completed", "turn.failed", "turn.cancelled"])
        .values_list("type", flat=True)) == ["turn.cancelled"]
    again = cancel(api, "slow")
    assert again.status_code == 200 and again.json() == body
    row = turn_row(goal_page(operator)[1], "slow")
    assert "cancelled" in row and ">stop<" in row and "cancel-turn" not in row
    # the agent is free for its next turn; the cancelled one was its only session turn
    assert Turn.objects.filter(session_id=session_id).count() == 1
    assert api.post(TURNS, {"key": "next"}).status_code == 202


def test_the_cancel_button_ends_a_queued_turn_before_anything_is_posted(api, ready,
                                                                         session_id,
                                                                         operator, viewer):
    assert api.post(TURNS, {"key": "q1"}).status_code == 202
    client, html = goal_page(operator)
    form = re.search(r'<form class="inline" method="post" action="([^"]+)">'
                     r'<input type="hidden" name="csrfmiddlewaretoken"[^>]*>'
                     r'<button type="submit" data-action="cancel-turn">', turn_row(html, "q1"))
    assert form and form.group(1) == "/panel/sessions/goals/ship/agents/builder/turns/q1/cancel/"
    assert "cancel-turn" not in goal_page(viewer)[1]  # viewers read
    denied = goal_page(viewer)[0].post(form.group(1))
    assert denied.status_code == 403
    assert GoalTurn.objects.get(key="q1").state == "queued"
    done = client.post(form.group(1), follow=True)
    assert done.status_code == 200 and "turn q1 cancelled." in done.content.decode()
    pk = GoalTurn.objects.get(key="q1").pk
    assert turns.advance(pk).state == "cancelled"  # the queued task finds nothing to do
    assert_cancelled(api, "q1", ready)
    assert Turn.objects.filter(session_id=session_id).count() == 0


def test_settled_and_unknown_turns_are_refused(api, ready, session_id, viewer):
    assert cancel(api, "nope").status_code == 404
    assert api.patch(GOAL, {"state": "paused"}).status_code == 200
    skipped = api.post(TURNS, {"key": "skip"})
    assert skipped.json()["state"] == "skipped"
    refused = cancel(api, "skip")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "turn_settled" and "skipped" in error["message"]
    assert "state" in error["fields"]
    assert api.patch(GOAL, {"state": "active"}).status_code == 200
    # a turn that ended unattempted (its agent was detached before the post) is done
    api.post(TURNS, {"key": "gone"})
    assert api.post("/api/v1/goals/ship/agents/builder/detach/").status_code == 200
    assert turns.advance(GoalTurn.objects.get(key="gone").pk).state == "done"
    refused = cancel(api, "gone")
    assert refused.status_code == 409 and "done" in refused.json()["error"]["message"]
    assert GoalTurn.objects.get(key="gone").state == "done"
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(viewer)[1]}")
    assert reader.post(TURNS + "gone/cancel").status_code == 403


def test_a_crash_or_replay_does_not_resurrect_a_cancelled_turn(api, ready, session_id):
    """The host died with the turn running and the interrupt unread: the sweep's reconcile
    ends the session turn without continuing it, and every step run again, as two
    supervisors or a redelivered task would, leaves the envelope cancelled."""
    from goals.turns import _dispatch, _settle, _validate, _write

    api.post(TURNS, {"key": "c1"})
    pk = GoalTurn.objects.get(key="c1").pk
    assert turns.advance(pk).state == "running"
    session_turn = Turn.objects.get(session_id=session_id, key="loopx-c1")
    timeline.start_turn(session_id, session_turn.pk)  # a host opened it, then died
    asked = cancel(api, "c1")
    assert asked.status_code == 202 and asked.json()["state"] == "running"
    assert cancel(api, "c1").json() == asked.json()  # asked once; the same answer
    assert timeline.reconcile_running(session_id) == 1  # the lease sweep, after the death
    assert Turn.objects.get(pk=session_turn.pk).state == "cancelled"
    assert not Turn.objects.filter(session_id=session_id, key__endswith=":resumed").exists()
    for _ in range(2):
        turns.advance(pk)
        for step in (_dispatch, _validate, _write, _settle):
            step(GoalTurn.objects.get(pk=pk))
    assert GoalTurn.objects.get(pk=pk).state == "cancelled"
    assert_cancelled(api, "c1", ready)
    replay = api.post(TURNS, {"key": "c1"})  # the same key again is the same envelope
    assert replay.status_code == 200 and replay.json()["state"] == "cancelled"
    assert Turn.objects.filter(session_id=session_id).count() == 1
