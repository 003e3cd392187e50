"""Questions and permission requests answered from Lark cards reach the real runtime:
Claude's AskUserQuestion through the Claude Agent SDK sidecar, Codex's command approval
through the app-server, both against the scripted model server; the click arrives as a
signed, encrypted `card.action.trigger` at the real endpoint."""

from __future__ import annotations

import contextlib
import json
import threading

import pytest

from conversations.cards import permission as permission_card
from conversations.cards import question as question_card
from conversations.models import Conversation
from intake.models import Source
from intake.sources.lark import Lark
from policy import services as policy_services
from sessions import control, services, timeline
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.support.lark_events import card_action_event, sealed
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

TOKEN, KEY = "v-token", "enc-key-123"
QUESTIONS = {"questions": [
    {"question": "Which color?", "header": "Color", "multiSelect": False,
     "options": [{"label": "red", "description": "warm"},
                 {"label": "blue", "description": "cold"}]},
    {"question": "Which sizes?", "header": "Size", "multiSelect": True,
     "options": [{"label": "S", "description": "small"},
                 {"label": "L", "description": "large"}]}]}


@pytest.fixture
def lark(db):
    config = Lark.validate_config({"app_id": "cli_test", "bot_open_id": "ou_bot",
                                   "domain": "https://open.larksuite.com",
                                   "groups": ["oc_team"]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "encrypt_key": KEY}
    source.save()
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": ["ou_alice"], "rows": {"group_configured": {
            "addressed": True, "unaddressed_allowed": False,
            "unaddressed_anyone": False}}}}}, None)
    return source


def _session(runtime, model, lark, **choices):
    session = services.create_session(Launch.direct(runtime=runtime, provider="scripted",
                                                    model=model, **choices))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    control.clear(session.pk)
    conversation = Conversation.objects.create(source=lark, mode="topic", chat_id="oc_team",
                                               thread_key="omt_1", session_id=session.pk)
    return session, conversation


def _host(session_id):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", run_host(session_id)))
    thread.start()
    return thread


def _stop(session_id, thread):
    """A failed test leaves no host waiting for an answer."""
    if not list(_done(session_id)):
        with contextlib.suppress(services.CommandError):
            services.interrupt(session_id)
    thread.join(90)


def _click(client, value, form_value=None):
    event = card_action_event(token=TOKEN, value=value, chat_id="oc_team",
                              form_value=form_value)
    body, headers = sealed(event, encrypt_key=KEY)
    response = client.post("/hooks/lark/lk", data=body, content_type="application/json",
                           **headers)
    assert response.status_code == 200
    return response.json()


def _asked(session_id, type_="question.asked"):
    return [e.payload for e in TimelineEvent.objects.filter(session_id=session_id, type=type_)
            .order_by("seq")]


def _done(session_id):
    return TimelineEvent.objects.filter(
        session_id=session_id, type__in=["turn.completed", "turn.failed",
                                         "turn.cancelled"]).values_list("type", flat=True)


def test_claude_questions_answered_from_cards(client, lark, anthropic_provider, session_dirs,
                                              model_server):
    session, conversation = _session("claude", "claude-sonnet-4-5", lark)
    model_server.script(ToolCall("", tool="AskUserQuestion", arguments=QUESTIONS),
                        Text("thanks"))
    services.post_message(session.pk, "ask me two things")
    thread = _host(session.pk)
    try:
        wait_for(lambda: len(_asked(session.pk)) == 2, timeout=90)
        color, sizes = _asked(session.pk)
        ids = {"conversation_id": conversation.pk, "session_id": session.pk,
               "generation": conversation.generation, "lang": "en"}
        color_card = question_card.render(color, **ids)
        blue = next(e for e in color_card["body"]["elements"]
                    if e["tag"] == "button" and e["text"]["content"] == "blue")
        shown = json.dumps(color_card, ensure_ascii=False)
        assert "Which color?" in shown and '"Color"' in shown
        if color["questions"][0].get("descriptions"):  # where the runtime side gives them
            assert "blue — cold" in shown
        assert _click(client, blue["behaviors"][0]["value"])["toast"]["type"] == "success"
        sizes_card = question_card.render(sizes, **ids)
        form = next(e for e in sizes_card["body"]["elements"] if e["tag"] == "form")
        assert form["elements"][0]["tag"] == "multi_select_static"
        submit = form["elements"][-1]["behaviors"][0]["value"]
        answered = _click(client, submit, {"q0_pick": ["0", "1"]})
        assert answered["toast"]["type"] == "success"
        assert "Answer: S, L" in json.dumps(answered["card"])
        wait_for(lambda: list(_done(session.pk)), timeout=90)
    finally:
        _stop(session.pk, thread)
    assert list(_done(session.pk)) == ["turn.completed"]
    sent = json.dumps(model_server.tool_requests()[-1].body["messages"][-1])
    assert "Which color?" in sent and "blue" in sent and "S,L" in sent


@pytest.mark.parametrize("kinds,written", [(("allow_once",), True),
                                           (("reject_once", "reject_always", "cancel"), False)])
def test_codex_permission_answered_from_a_card(kinds, written, client, lark, openai_provider,
                                               session_dirs, model_server):
    session, conversation = _session("codex", "gpt-5.5", lark, permission_mode="ask")
    model_server.script(ToolCall("echo ok > allowed.txt",
                                 extra={"sandbox_permissions": "require_escalated",
                                        "justification": "outside the sandbox"}),
                        Text("done"))
    services.post_message(session.pk, "write allowed.txt")
    thread = _host(session.pk)
    try:
        wait_for(lambda: timeline.pending_requests(session.pk), timeout=60)
        (request,) = _asked(session.pk, "permission.requested")
        card = permission_card.render(request, conversation_id=conversation.pk,
                                      session_id=session.pk,
                                      generation=conversation.generation, lang="en")
        buttons = {b["behaviors"][0]["value"]["option"]: b for b in card["body"]["elements"]
                   if b["tag"] == "button"}
        option = next((o for o in request["options"] if o["kind"] in kinds), None)
        assert option is not None, request["options"]
        answer = _click(client, buttons[option["id"]]["behaviors"][0]["value"])
        assert answer["toast"]["type"] == "success"
        again = _click(client, buttons[option["id"]]["behaviors"][0]["value"])
        assert again["toast"]["type"] == "error"
        assert again["toast"]["content"] in ("This was already answered.",
                                             "This is no longer waiting for an answer.")
        wait_for(lambda: list(_done(session.pk)), timeout=60)
    finally:
        _stop(session.pk, thread)
    # Codex offers deny as `cancel` where it has no `decline`: the turn then stops
    assert list(_done(session.pk)) == (["turn.cancelled"] if option["kind"] == "cancel"
                                       else ["turn.completed"])
    answered = _asked(session.pk, "permission.answered")
    assert [a["option_id"] for a in answered] == [option["id"]]
    assert (session_dirs / "work" / f"session-{session.pk}" / "allowed.txt").exists() is written
