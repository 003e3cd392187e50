"""A sensitive answer (an ACP elicitation field with ``format: password``) reaches the
agent through the session host and nowhere else: not the stored timeline, not the logs,
not an error message."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from runtimes.answers import AnswerRefused, check_payload_answers
from sessions import services
from sessions.models import Session, TimelineEvent, Turn
from sessions.new_session import Launch
from tests.runtimes.test_acp_elicitation import SECRET, answers_sent, scripted_agent
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

SCHEMA = {"type": "object", "properties": {
    "user": {"type": "string", "title": "User"},
    "pin": {"type": "string", "title": "PIN", "format": "password"}}}


def test_a_sensitive_refusal_does_not_repeat_the_answer():
    questions = [{"id": "q0", "text": "PIN?", "options": ["1111", "2222"],
                  "allow_custom": False, "sensitive": True}]
    with pytest.raises(AnswerRefused) as refused:
        check_payload_answers(questions, {"q0": SECRET})
    assert SECRET not in str(refused.value)
    questions[0]["sensitive"] = False
    with pytest.raises(AnswerRefused) as shown:
        check_payload_answers(questions, {"q0": "3333"})
    assert "3333" in str(shown.value)  # an ordinary answer may be named


def test_a_sensitive_answer_is_never_echoed_or_logged(api, openai_provider, session_dirs,
                                                      model_server, settings, tmp_path,
                                                      caplog):
    runtimes, log, env = scripted_agent(tmp_path / "agent", SCHEMA)
    settings.AMUX_RUNTIMES_DIR = runtimes
    caplog.set_level(logging.DEBUG)
    session = services.create_session(Launch.direct(runtime="acp", provider="scripted",
                                                    model="gpt-5.5", env=env))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    services.post_message(session.pk, "log me in")
    import threading

    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", run_host(session.pk)))
    thread.start()
    responses = []
    try:
        wait_for(lambda: TimelineEvent.objects.filter(
            session=session, type="question.asked").count() == 2, timeout=90)
        user, pin = (e.payload for e in TimelineEvent.objects.filter(
            session=session, type="question.asked").order_by("seq"))
        assert pin["questions"][0]["sensitive"] is True
        assert user["questions"][0]["sensitive"] is False
        url = f"/api/v1/sessions/{session.pk}/questions/"
        bad = api.post(url + pin["request_id"], {"answers": {"q1": [SECRET, SECRET]}},
                       format="json")
        responses.append(bad.content.decode())
        assert bad.status_code == 400
        ok = api.post(url + pin["request_id"], {"answers": {"q1": SECRET}}, format="json")
        responses.append(ok.content.decode())
        assert ok.status_code == 202
        again = api.post(url + pin["request_id"], {"answers": {"q1": SECRET}}, format="json")
        responses.append(again.content.decode())
        assert again.status_code == 409
        assert api.post(url + user["request_id"], {"answers": {"q0": "ann"}},
                        format="json").status_code == 202
        wait_for(lambda: Turn.objects.filter(session=session, state="completed").exists(),
                 timeout=90)
    finally:
        thread.join(90)
    [sent] = answers_sent(Path(session.workdir) / log.name)
    assert sent["result"] == {"action": "accept", "content": {"user": "ann", "pin": SECRET}}
    said = TimelineEvent.objects.get(session=session, type="message.completed").payload
    assert said["text"] == 'form accept {"pin": "matched", "user": "ann"}'
    stored = json.dumps([[e.type, e.payload, e.provenance] for e in
                         TimelineEvent.objects.filter(session=session)])
    assert TimelineEvent.objects.filter(session=session, type="question.answered").count() == 2
    assert SECRET not in stored
    assert SECRET not in json.dumps([t.input for t in Turn.objects.filter(session=session)])
    assert SECRET not in caplog.text
    assert not any(SECRET in r for r in responses)
