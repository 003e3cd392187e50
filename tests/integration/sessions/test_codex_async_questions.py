"""Codex async questions (``request_user_input_async``) through the session host and the
REST API: they do not block the session, stay open after their turn, and their answer
enters the same native conversation as an ordinary input. Late, duplicate and invalid
answers are refused."""

from __future__ import annotations

import json

import pytest

from sessions import services, timeline
from sessions.models import Session, TimelineEvent, Turn
from sessions.new_session import Launch
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

ASYNC_MODEL = "gpt-6.2-sol"  # its catalog entry offers request_user_input_async
QUESTIONS = {"questions": [{"title": "Which color?", "options": ["red", "blue"]},
                           {"title": "Anything else?"}]}


def test_an_async_answer_enters_the_same_conversation_as_input(api, openai_provider,
                                                               session_dirs, model_server):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model=ASYNC_MODEL))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(ToolCall("", tool="request_user_input_async", namespace="functions",
                                 arguments=QUESTIONS),
                        Text("carrying on meanwhile"), Text("blue it is"))
    services.post_message(session.pk, "paint the shed, ask me what you need")
    assert run_host(session.pk) == "slept"  # the turn ended: nothing blocked the session
    first = Turn.objects.get(session=session, seq=1)
    assert first.state == "completed"
    asked = list(TimelineEvent.objects.filter(session=session, type="question.asked")
                 .order_by("seq"))
    assert [(e.payload["blocking"], e.payload["delivery"]) for e in asked] == [
        (False, "async")] * 2
    color, other = (e.payload for e in asked)
    assert color["questions"][0]["options"] == ["red", "blue"]
    assert color["questions"][0]["allow_custom"] is True
    # open after their turn ended (no native request waits for them)
    assert set(timeline.pending_requests(session.pk)) == {color["request_id"],
                                                          other["request_id"]}
    url = f"/api/v1/sessions/{session.pk}/questions/"
    bad = api.post(url + color["request_id"], {"answers": {"q0": ""}}, format="json")
    assert bad.status_code == 400 and "answers" in bad.json()["error"]["fields"]
    assert api.post(url + color["request_id"], {"answers": {"q0": "blue"}},
                    format="json").status_code == 202
    again = api.post(url + color["request_id"], {"answers": {"q0": "red"}}, format="json")
    assert again.status_code == 409  # a duplicate
    queued = Turn.objects.get(session=session, seq=2)
    assert queued.state == "queued" and queued.key == f"answer:{color['request_id']}"
    assert queued.input["text"] == "> Which color?\n\nblue"
    answered = TimelineEvent.objects.get(session=session, type="question.answered")
    assert answered.payload == {"request_id": color["request_id"], "input_turn": 2}
    assert set(timeline.pending_requests(session.pk)) == {other["request_id"]}

    native = Session.objects.get(pk=session.pk).native_ref
    assert run_host(session.pk) == "slept"  # the next host resumes the same thread
    assert Turn.objects.get(pk=queued.pk).state == "completed"
    assert Session.objects.get(pk=session.pk).native_ref == native
    last = model_server.tool_requests()[-1].body["input"]
    text = json.dumps(last)
    # the model sees its own question call earlier in the conversation, then the answer
    assert "request_user_input_async" in text
    assert text.index("request_user_input_async") < text.index("> Which color?\\n\\nblue")

    # a clear starts a new native conversation: the other question is gone with the old one
    services.clear(session.pk)
    late = api.post(url + other["request_id"], {"answers": {"q1": "no"}}, format="json")
    assert late.status_code == 409 and late.json()["error"]["code"] == "not_pending"
    assert Turn.objects.filter(session=session).count() == 2


def test_cancelling_an_async_question_closes_it_without_input(openai_provider, session_dirs,
                                                              model_server):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model=ASYNC_MODEL))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(ToolCall("", tool="request_user_input_async", namespace="functions",
                                 arguments=QUESTIONS), Text("ok"))
    services.post_message(session.pk, "ask me")
    assert run_host(session.pk) == "slept"
    first = TimelineEvent.objects.filter(session=session, type="question.asked") \
        .order_by("seq").first().payload
    services.answer_question(session.pk, first["request_id"], None)
    assert first["request_id"] not in timeline.pending_requests(session.pk)
    assert Turn.objects.filter(session=session).count() == 1
    with pytest.raises(services.Conflict):
        services.answer_question(session.pk, first["request_id"], {"q0": "red"})


REQUEST = {"questions": [{"id": "color", "header": "Color", "question": "Which color?",
                          "options": [{"label": "red", "description": "warm"},
                                      {"label": "blue", "description": "cool"}]}]}


def test_a_probed_request_user_input_is_answered_through_the_api(api, openai_provider,
                                                                  session_dirs, model_server):
    import threading

    from tests.support.sessions import wait_for

    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(ToolCall("", tool="request_user_input", arguments=REQUEST),
                        Text("blue, then"))
    services.post_message(session.pk, "ask me")
    thread = threading.Thread(target=lambda: run_host(session.pk))
    thread.start()
    try:
        asked = wait_for(lambda: TimelineEvent.objects.filter(
            session=session, type="question.asked").first(), timeout=90).payload
        assert asked["blocking"] is False and "delivery" not in asked
        assert asked["questions"][0]["descriptions"] == {"red": "warm", "blue": "cool"}
        url = f"/api/v1/sessions/{session.pk}/questions/{asked['request_id']}"
        assert api.post(url, {"answers": {"color": "blue"}}, format="json").status_code == 202
        wait_for(lambda: Turn.objects.filter(session=session, state="completed").exists(),
                 timeout=90)
        late = api.post(url, {"answers": {"color": "red"}}, format="json")
        assert late.status_code == 409  # answered, and its turn has ended
    finally:
        thread.join(90)
    facts = Session.objects.get(pk=session.pk).runtime_facts
    assert facts["request_user_input"] == {"enabled": True, "by": "probe",
                                           "detail": "under development"}
    sent_back = json.dumps(model_server.tool_requests()[-1].body["input"][-1])
    assert "blue" in sent_back and "unavailable" not in sent_back
