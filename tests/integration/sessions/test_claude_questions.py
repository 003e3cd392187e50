"""Claude's AskUserQuestion through the session host and the REST API: one
`question.asked` per question, each answered through its own request, Claude gets the
answers together; an answer that does not fit is refused with 400 naming `answers`."""

from __future__ import annotations

import json
import threading

import pytest

from sessions import services
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

QUESTIONS = {"questions": [
    {"question": "Which color?", "header": "Color", "multiSelect": False,
     "options": [{"label": "red", "description": "warm"},
                 {"label": "blue", "description": "cold"}]},
    {"question": "Which sizes?", "header": "Size", "multiSelect": True,
     "options": [{"label": "S", "description": "small"},
                 {"label": "L", "description": "large"}]}]}


def _asked(session_id):
    return list(TimelineEvent.objects.filter(session_id=session_id, type="question.asked")
                .order_by("seq"))


def test_two_questions_answered_through_the_api(api, anthropic_provider, session_dirs,
                                                model_server):
    session = services.create_session(Launch.direct(runtime="claude", provider="scripted",
                                                    model="claude-sonnet-4-5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(ToolCall("", tool="AskUserQuestion", arguments=QUESTIONS),
                        Text("thanks"))
    services.post_message(session.pk, "ask me two things")
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", run_host(session.pk)))
    thread.start()
    try:
        wait_for(lambda: len(_asked(session.pk)) == 2, timeout=90)
        color, sizes = (e.payload for e in _asked(session.pk))
        assert [q["text"] for q in color["questions"]] == ["Which color?"]
        assert sizes["questions"][0]["multi_select"] is True
        url = f"/api/v1/sessions/{session.pk}/questions/"
        bad = api.post(url + sizes["request_id"], {"answers": {"q1": []}}, format="json")
        assert bad.status_code == 400 and "answers" in bad.json()["error"]["fields"]
        missing = api.post(url + color["request_id"], {"answers": {"other": "x"}},
                           format="json")
        assert missing.status_code == 400
        assert api.post(url + color["request_id"], {"answers": {"q0": "blue"}},
                        format="json").status_code == 202
        again = api.post(url + color["request_id"], {"answers": {"q0": "red"}},
                         format="json")
        assert again.status_code == 409  # a duplicate answer
        assert api.post(url + sizes["request_id"], {"answers": {"q1": ["S", "L"]}},
                        format="json").status_code == 202
        wait_for(lambda: TimelineEvent.objects.filter(
            session_id=session.pk, type="turn.completed").exists(), timeout=90)
    finally:
        thread.join(90)
    answered = json.dumps(model_server.tool_requests()[-1].body["messages"][-1])
    assert "Which color?" in answered and "blue" in answered and "S,L" in answered
    assert TimelineEvent.objects.filter(session_id=session.pk,
                                        type="question.answered").count() == 2


def test_cancelling_one_question_through_the_api_cancels_the_call(api, anthropic_provider,
                                                                  session_dirs, model_server):
    session = services.create_session(Launch.direct(runtime="claude", provider="scripted",
                                                    model="claude-sonnet-4-5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(ToolCall("", tool="AskUserQuestion", arguments=QUESTIONS),
                        Text("no answers then"))
    services.post_message(session.pk, "ask me two things")
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", run_host(session.pk)))
    thread.start()
    try:
        wait_for(lambda: len(_asked(session.pk)) == 2, timeout=90)
        color, sizes = (e.payload for e in _asked(session.pk))
        url = f"/api/v1/sessions/{session.pk}/questions/"
        both = api.post(url + color["request_id"], {"answers": {"q0": "red"}, "cancel": True},
                        format="json")
        assert both.status_code == 400 and "answers" in both.json()["error"]["fields"]
        assert api.post(url + color["request_id"], {"cancel": True},
                        format="json").status_code == 202
        # the other question of the call is closed with it
        wait_for(lambda: TimelineEvent.objects.filter(
            session_id=session.pk, type="question.answered").count() == 2, timeout=60)
        assert api.post(url + sizes["request_id"], {"answers": {"q1": ["S"]}},
                        format="json").status_code == 409
        wait_for(lambda: TimelineEvent.objects.filter(
            session_id=session.pk, type="turn.completed").exists(), timeout=90)
    finally:
        thread.join(90)
    cancelled = json.dumps(model_server.tool_requests()[-1].body["messages"][-1])
    # Claude was told the call was cancelled: an error result, no answers
    assert '"is_error": true' in cancelled and "S,L" not in cancelled
