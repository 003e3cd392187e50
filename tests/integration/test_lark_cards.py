"""Card callbacks (`card.action.trigger`) through the real endpoint, encrypted and signed
as Lark does it: verified, re-checked (session binding, generation, the policy with the
operator as actor) and idempotent; the question and permission cards they come from."""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest
from django.apps import apps

from conversations import actions, card_actions
from conversations.card_release import cards_released_by, stale_cards
from conversations.cards import permission as permission_card
from conversations.cards import question as question_card
from conversations.models import CardCallback, Conversation, EventCard
from intake.lark_receiver import event_handler
from intake.models import Delivery, Source
from intake.sources.lark import Lark
from policy import services as policy_services
from runtimes.events import PermissionOption, PermissionRequested, Question, QuestionAsked
from sessions import control, services, timeline
from sessions.models import TimelineEvent
from tests.factories import SessionFactory
from tests.support.lark_events import card_action_event, sealed

pytestmark = pytest.mark.django_db

TOKEN = "v-token"
KEY = "enc-key-123"
BOT = "ou_bot"


@pytest.fixture
def lark():
    config = Lark.validate_config({"app_id": "cli_test", "bot_open_id": BOT,
                                   "domain": "https://open.larksuite.com",
                                   "groups": ["oc_team"], "receive_all": ["oc_team"]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "encrypt_key": KEY, "app_secret": "sec"}
    source.save()
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": ["ou_alice"],
        "rows": {"group_configured": {"addressed": True, "unaddressed_allowed": True,
                                      "unaddressed_anyone": False},
                 "direct": {"addressed": True, "unaddressed_allowed": True,
                            "unaddressed_anyone": False}}}}}, None)
    return source


def _running_session(*events):
    """A session with a running turn whose timeline holds `events`."""
    session = SessionFactory(runtime="codex")
    control.clear(session.pk)  # Redis outlives the test database: no list of a former run
    turn = services.post_message(session.pk, "ask me")
    timeline.start_turn(session.pk, turn.pk)
    timeline.record(session.pk, turn.pk, list(events))
    return session, turn


def _bound(lark, session, **kw):
    return Conversation.objects.create(source=lark, mode="topic", chat_id="oc_team",
                                       thread_key="omt_1", session=session, **kw)


def _card(conversation, kind, request_id, **kw):
    seq = TimelineEvent.objects.get(
        session_id=conversation.session_id, payload__request_id=request_id,
        type="question.asked" if kind == "question" else "permission.requested").seq
    return EventCard.objects.create(conversation=conversation,
                                    session_id=conversation.session_id, event_seq=seq,
                                    kind=kind, request_id=request_id, chat_id="oc_team",
                                    message_id="om_card", generation=conversation.generation,
                                    **kw)


def _question(rid, **kw):
    q = {"text": "Which color?", "options": ("red", "blue"), "id": "color",
         "header": "Color", **kw}
    return QuestionAsked(request_id=rid, questions=(Question(**q),))


def _permission(rid):
    return PermissionRequested(request_id=rid, title="run: rm -rf build", options=(
        PermissionOption(id="accept", label="accept", kind="allow_once"),
        PermissionOption(id="acceptForSession", label="acceptForSession", kind="allow_always"),
        PermissionOption(id="decline", label="decline", kind="reject_once")))


def _controls(session_id):
    return [json.loads(x) for x in control.client().lrange(control.key(session_id), 0, -1)]


def _answers(session_id):
    return [c for c in _controls(session_id) if c["op"] in ("answer", "permission")]


def click(client, value, *, key=KEY, slug="lk", **kw):
    event = card_action_event(token=TOKEN, value=value, chat_id="oc_team", **kw)
    body, headers = sealed(event, encrypt_key=key)
    return client.post(f"/hooks/lark/{slug}", data=body, content_type="application/json",
                       **headers), event


def _value(conversation, kind, rid, **extra):
    return {"amux": kind, "conversation": conversation.pk,
            "session": conversation.session_id, "gen": conversation.generation,
            "request": rid, **extra}


def test_a_button_answers_the_question_once_and_the_card_shows_it(client, lark):
    rid = uuid.uuid4().hex
    session, _ = _running_session(_question(rid))
    conversation = _bound(lark, session)
    card = _card(conversation, "question", rid)
    started = time.monotonic()
    response, event = click(client, _value(conversation, "question.answer", rid,
                                           question="color", option=1))
    assert time.monotonic() - started < 3  # Lark's limit for answering a callback
    assert response.status_code == 200
    body = response.json()
    assert body["toast"] == {"type": "success", "content": "Answer sent to the agent."}
    shown = json.dumps(body["card"]["data"])
    assert body["card"]["type"] == "raw" and "Answer: blue" in shown and "behaviors" not in shown
    assert _answers(session.pk) == [{"op": "answer", "request_id": rid,
                                     "answers": {"color": "blue"}}]
    card.refresh_from_db()
    assert card.state == "answered"
    # Lark delivers the same callback again: the first outcome, nothing twice
    body2, headers = sealed(event, encrypt_key=KEY)
    again = client.post("/hooks/lark/lk", data=body2, content_type="application/json",
                        **headers)
    assert again.status_code == 200 and again.json() == body
    assert len(_answers(session.pk)) == 1 and CardCallback.objects.count() == 1
    # a second click (a new event) on the answered card is refused plainly
    second, _ = click(client, _value(conversation, "question.answer", rid,
                                     question="color", option=0))
    assert second.json() == {"toast": {"type": "error", "content":
                                       "This card is closed: it was answered or released."}}
    assert len(_answers(session.pk)) == 1
    assert not Delivery.objects.exists()  # a callback is answered, never stored raw


def test_a_duplicate_answer_without_a_card_row_is_refused_by_the_service(client, lark):
    rid = uuid.uuid4().hex
    session, _ = _running_session(_question(rid))
    conversation = _bound(lark, session)
    first, _ = click(client, _value(conversation, "question.answer", rid, question="color",
                                    option=0))
    assert first.json()["toast"]["type"] == "success"
    second, _ = click(client, _value(conversation, "question.answer", rid, question="color",
                                     option=1))
    assert second.json()["toast"] == {"type": "error", "content": "This was already answered."}
    assert sorted(CardCallback.objects.values_list("outcome__refused", flat=True),
                  key=str) == [None, "already_answered"]
    assert len(_answers(session.pk)) == 1


def test_unverified_callbacks_are_refused(client, lark):
    rid = uuid.uuid4().hex
    session, _ = _running_session(_question(rid))
    conversation = _bound(lark, session)
    value = _value(conversation, "question.answer", rid, question="color", option=0)
    event = card_action_event(token="wrong", value=value)
    body, headers = sealed(event, encrypt_key=KEY)
    assert client.post("/hooks/lark/lk", data=body, content_type="application/json",
                       **headers).status_code == 401
    event = card_action_event(token=TOKEN, value=value)
    body, headers = sealed(event, encrypt_key=KEY, sign_key="another-key")
    assert client.post("/hooks/lark/lk", data=body, content_type="application/json",
                       **headers).status_code == 401
    body, _ = sealed(event, encrypt_key=KEY)  # encrypted, no signature headers
    assert client.post("/hooks/lark/lk", data=body, content_type="application/json"
                       ).status_code == 401
    body, headers = sealed(event, encrypt_key=KEY)
    assert client.post("/hooks/lark/nope", data=body, content_type="application/json",
                       **headers).status_code == 404
    assert not _answers(session.pk) and not CardCallback.objects.exists()
    # without an encrypt key the verification token alone decides
    lark.secrets = {"verification_token": TOKEN}
    lark.save()
    wrong = card_action_event(token="wrong", value=value)
    assert client.post("/hooks/lark/lk", data=json.dumps(wrong),
                       content_type="application/json").status_code == 401
    right = card_action_event(token=TOKEN, value=value)
    ok = client.post("/hooks/lark/lk", data=json.dumps(right), content_type="application/json")
    assert ok.status_code == 200 and ok.json()["toast"]["type"] == "success"
    assert len(_answers(session.pk)) == 1


def test_stale_cards_are_refused(client, lark):
    rid = uuid.uuid4().hex
    session, _ = _running_session(_question(rid))
    conversation = _bound(lark, session, generation=2)
    old = _value(conversation, "question.answer", rid, question="color", option=0)
    old["gen"] = 1
    response, _ = click(client, old)
    assert response.json() == {"toast": {"type": "error", "content":
                                         "This card is out of date: the conversation has "
                                         "moved on."}}
    # the conversation now binds another session: a card of the old one controls nothing
    other = SessionFactory(runtime="codex")
    Conversation.objects.filter(pk=conversation.pk).update(session=other)
    response, _ = click(client, _value(conversation, "question.answer", rid,
                                       question="color", option=0))
    assert "no longer uses" in response.json()["toast"]["content"]
    # a button value that names no conversation of this source
    response, _ = click(client, {"amux": "question.answer", "conversation": 999999,
                                 "session": session.pk, "gen": 1, "request": rid})
    assert response.json()["toast"]["content"] == "This conversation no longer exists."
    response, _ = click(client, {"something": "else"})
    assert response.json()["toast"]["content"] == "This card is not one of amux's."
    assert not _answers(session.pk)
    refused = CardCallback.objects.values_list("outcome__refused", flat=True)
    assert set(refused) == {"stale", "rebound", "no_conversation", "not_amux"}


def test_an_operator_the_policy_does_not_allow_is_refused(client, lark):
    rid = uuid.uuid4().hex
    session, _ = _running_session(_question(rid))
    conversation = _bound(lark, session)
    value = _value(conversation, "question.answer", rid, question="color", option=0)
    for who in ("ou_mallory", BOT, ""):
        response, _ = click(client, value, operator=who)
        assert response.json()["toast"] == {
            "type": "error", "content": "You are not allowed to act on this conversation."}
    assert not _answers(session.pk)
    # a topic outside the configured groups: the "other groups" row decides, and it is off
    outside = Conversation.objects.create(source=lark, mode="topic", chat_id="oc_elsewhere",
                                          thread_key="omt_9", session=session)
    response, _ = click(client, _value(outside, "question.answer", rid, question="color",
                                       option=0))
    assert response.json()["toast"]["content"] == \
        "You are not allowed to act on this conversation."
    ok, _ = click(client, value)  # alice is allowed
    assert ok.json()["toast"]["type"] == "success"


def test_a_form_answers_multi_select_and_custom_questions(client, lark):
    rid = uuid.uuid4().hex
    asked = QuestionAsked(request_id=rid, questions=(
        Question(text="Which sizes?", options=("S", "M", "L"), multi_select=True, id="sizes",
                 allow_custom=False, header="Size"),
        Question(text="Anything else?", id="note")))
    session, _ = _running_session(asked)
    conversation = _bound(lark, session)
    payload = TimelineEvent.objects.get(session=session, type="question.asked").payload
    rendered = question_card.render(payload, conversation_id=conversation.pk,
                                    session_id=session.pk, generation=1, lang="en")
    form = next(e for e in rendered["body"]["elements"] if e["tag"] == "form")
    assert [f["tag"] for f in form["elements"]] == ["multi_select_static", "input", "button"]
    submit = form["elements"][-1]
    value = submit["behaviors"][0]["value"]
    incomplete, _ = click(client, value, form_value={"q0_pick": ["0"]})
    assert incomplete.json()["toast"]["content"] == "Answer every question before sending."
    response, _ = click(client, value, form_value={"q0_pick": ["0", "2"],
                                                   "q1_text": " gift wrap "})
    assert response.json()["toast"]["type"] == "success"
    assert _answers(session.pk) == [{"op": "answer", "request_id": rid,
                                     "answers": {"sizes": ["S", "L"], "note": "gift wrap"}}]


def test_an_answer_that_does_not_fit_is_refused_with_the_reason(client, lark):
    rid = uuid.uuid4().hex
    asked = QuestionAsked(request_id=rid, questions=(
        Question(text="Pick", options=("a", "b"), allow_custom=False, id="q"),))
    session, _ = _running_session(asked)
    conversation = _bound(lark, session)
    response, _ = click(client, _value(conversation, "question.answer", rid, form=True),
                        form_value={"q0_text": "c"})
    toast = response.json()["toast"]
    assert toast["type"] == "error" and toast["content"].startswith(
        "That answer does not fit the question:") and "'c' is not one of" in toast["content"]
    assert not _answers(session.pk)


def test_a_sensitive_answer_is_never_stored_shown_or_logged(client, lark, caplog):
    secret = f"hunter-{uuid.uuid4().hex}"
    rid = uuid.uuid4().hex
    asked = QuestionAsked(request_id=rid, questions=(
        Question(text="Your API token?", sensitive=True, id="token"),))
    session, _ = _running_session(asked)
    conversation = _bound(lark, session)
    _card(conversation, "question", rid)
    payload = TimelineEvent.objects.get(session=session, type="question.asked").payload
    rendered = question_card.render(payload, conversation_id=conversation.pk,
                                    session_id=session.pk, generation=1, lang="en")
    form = next(e for e in rendered["body"]["elements"] if e["tag"] == "form")
    assert form["elements"][0]["input_type"] == "password"
    caplog.set_level(logging.DEBUG)
    response, _ = click(client, _value(conversation, "question.answer", rid, form=True),
                        form_value={"q0_text": secret})
    assert response.json()["toast"]["type"] == "success"
    assert secret not in response.content.decode()
    assert _answers(session.pk)[0]["answers"] == {"token": secret}  # the runtime gets it
    assert not any(secret in r.getMessage() for r in caplog.records)
    for model in apps.get_models():  # in no stored row of any table
        for row in model.objects.all().values():
            assert secret not in json.dumps(row, default=str), model.__name__


def test_permission_card_buttons_are_the_requests_options(client, lark):
    rid = uuid.uuid4().hex
    session, _ = _running_session(_permission(rid))
    conversation = _bound(lark, session)
    _card(conversation, "permission", rid)
    payload = TimelineEvent.objects.get(session=session, type="permission.requested").payload
    rendered = permission_card.render(payload, conversation_id=conversation.pk,
                                      session_id=session.pk, generation=1, lang="zh-CN")
    buttons = [e for e in rendered["body"]["elements"] if e["tag"] == "button"]
    assert [b["text"]["content"] for b in buttons] == ["允许一次", "始终允许", "拒绝"]
    values = [b["behaviors"][0]["value"] for b in buttons]
    assert [v["option"] for v in values] == ["accept", "acceptForSession", "decline"]
    forged = {**values[0], "option": "approve_everything"}
    response, _ = click(client, forged)
    assert response.json()["toast"]["type"] == "error" and not _answers(session.pk)
    response, _ = click(client, values[1])
    assert response.json()["toast"] == {"type": "success", "content": "Sent: Always allow."}
    assert _answers(session.pk) == [{"op": "permission", "request_id": rid,
                                     "option_id": "acceptForSession"}]
    assert "Always allow" in json.dumps(response.json()["card"])


def test_a_late_click_after_the_turn_ended_is_refused(client, lark):
    rid = uuid.uuid4().hex
    session, turn = _running_session(_question(rid))
    conversation = _bound(lark, session)
    card = _card(conversation, "question", rid)
    from runtimes.events import TurnCompleted

    timeline.record(session.pk, turn.pk, [TurnCompleted()])
    response, _ = click(client, _value(conversation, "question.answer", rid,
                                       question="color", option=0))
    assert response.json()["toast"]["content"] == "This is no longer waiting for an answer."
    assert not _answers(session.pk)
    card.refresh_from_db()
    assert card.state == "open"  # a refusal changes nothing (releasing it is the sender's)


def test_the_long_connection_answers_a_callback_in_the_frame(lark):
    rid = uuid.uuid4().hex
    session, _ = _running_session(_question(rid))
    conversation = _bound(lark, session)
    event = card_action_event(token="", value=_value(conversation, "question.answer", rid,
                                                     question="color", option=0))
    response = event_handler("lk")._do_without_validation(json.dumps(event).encode())
    import lark_oapi

    answer = json.loads(lark_oapi.JSON.marshal(response))
    assert answer["toast"] == {"type": "success", "content": "Answer sent to the agent."}
    assert answer["card"]["type"] == "raw"
    assert _answers(session.pk)[0]["answers"] == {"color": "red"}
    again = event_handler("lk")._do_without_validation(json.dumps(event).encode())
    assert json.loads(lark_oapi.JSON.marshal(again)) == answer
    assert len(_answers(session.pk)) == 1 and not Delivery.objects.exists()


def test_released_and_stale_cards_become_inert(lark):
    rid, pid = uuid.uuid4().hex, uuid.uuid4().hex
    session, turn = _running_session(_question(rid), _permission(pid))
    conversation = _bound(lark, session)
    question, permission = _card(conversation, "question", rid), \
        _card(conversation, "permission", pid)
    answered = cards_released_by(session.pk, "permission.answered",
                                 {"request_id": pid, "option_id": "decline"})
    assert [(c.pk, c.state) for c, _ in answered] == [(permission.pk, "answered")]
    assert "Answered: Deny." in json.dumps(answered[0][1])
    released = cards_released_by(session.pk, "turn.cancelled", {}, turn_id=turn.pk)
    assert [(c.pk, c.state) for c, _ in released] == [(question.pk, "inert")]
    shown = json.dumps(released[0][1])
    assert "the turn ended" in shown and "behaviors" not in shown
    assert cards_released_by(session.pk, "turn.cancelled", {}, turn_id=turn.pk) == []
    # a raised generation leaves older open cards inert
    rid2 = uuid.uuid4().hex
    session2, _ = _running_session(_question(rid2))
    conversation2 = Conversation.objects.create(source=lark, mode="topic", chat_id="oc_team",
                                                thread_key="omt_2", session=session2)
    card2 = _card(conversation2, "question", rid2)
    conversation2.generation = 2
    conversation2.save()
    assert [c.pk for c, _ in stale_cards(conversation2)] == [card2.pk]
    card2.refresh_from_db()
    assert card2.state == "inert"


def test_a_click_that_fails_midway_changes_nothing_and_its_redelivery_is_carried_out(
        client, lark, caplog):
    """The claim of the event, what its handler wrote and the outcome are one transaction:
    a handler that fails after a write leaves neither the write nor the claim."""
    rid = uuid.uuid4().hex
    session, _ = _running_session(_question(rid))
    conversation = _bound(lark, session)
    card = _card(conversation, "question", rid)
    calls = []

    def fails_once(action):
        actions.request_card_answered(action.conversation, "question", rid)
        calls.append(action.event_id)
        if len(calls) == 1:
            raise RuntimeError("the handler failed after its first write")
        return "done"

    card_actions.register("test.fails_once")(fails_once)
    try:
        with caplog.at_level(logging.ERROR, logger="intake.card_hooks"):
            response, event = click(client, _value(conversation, "test.fails_once", rid))
        assert response.json()["toast"]["type"] == "error"
        card.refresh_from_db()
        assert card.state == "open" and not CardCallback.objects.exists()
        body, headers = sealed(event, encrypt_key=KEY)
        again = client.post("/hooks/lark/lk", data=body, content_type="application/json",
                            **headers)
        assert again.json()["toast"] == {"type": "success", "content": "done"}
        card.refresh_from_db()
        assert card.state == "answered" and len(calls) == 2
        assert CardCallback.objects.get().outcome["toast"]["content"] == "done"
    finally:
        card_actions.HANDLERS.pop("test.fails_once")
