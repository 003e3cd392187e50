"""A live_steering connector with a reply_mode answers in Lark (issue 17, item 5): the
final answer of the real Pi turn a mention started goes back into the message's thread
through the same outbox reply and Lark readback as an inbox settle — once, and only after
the turn ended. A connector without a reply_mode sends nothing."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from goals import ingress, replies
from goals.models import Connector, ConnectorReply
from intake.models import Source
from intake.sources.lark import Lark
from sessions.models import Session
from tests.support.model_server import Text
from tests.support.recording_server import RecordingServer
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(120)]

APP, CHAT = "cli_goals_turns", "oc_turns"


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        yield srv


def _steered(api, lark, reply_mode: str) -> tuple[int, Connector]:
    source = Source(kind="lark", slug="lt", name="Lark", config=Lark.validate_config(
        {"app_id": APP, "bot_open_id": "ou_bot", "domain": lark.url, "groups": [CHAT]}))
    source.secrets = {"verification_token": "v", "app_secret": "sec"}
    source.save()
    session_id = api.post("/api/v1/goals/ship/agents/builder/start/").json()["session"]
    Session.objects.filter(pk=session_id).update(idle_timeout_s=1)
    response = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
        "source": "lt", "source_ref": CHAT, "ingress_mode": "live_steering",
        "reply_mode": reply_mode})
    assert response.status_code == 201, response.content
    return session_id, Connector.objects.get(pk=response.json()["id"])


def _mention(connector, lark, message_id: str, text: str):
    lark.lark_message(message_id, chat_id=CHAT, text=text)
    receipt = ingress.accept(connector, ingress.Event(
        dedupe_key=message_id, kind="mention", text=text, addressed=True,
        at=timezone.now(), place=CHAT))
    assert receipt.outcome == "delivered", receipt.reason
    return receipt


def _app_replies(lark, parent: str) -> list[str]:
    return [json.loads(m["content"])["text"] for m in lark.state.lark_store.values()
            if m["sender"] == "app" and m["parent_id"] == parent]


def test_a_steered_turns_answer_goes_back_into_the_thread_once_read_back(
        api, pi_agent, model_server, lark):
    session_id, connector = _steered(api, lark, "topic_reply")
    model_server.script(Text("The release is cut."))
    receipt = _mention(connector, lark, "om_steer", "is the release cut?")

    outbox.drain(seconds=3)  # the turn has not run: nothing is sent, the row waits
    assert _app_replies(lark, "om_steer") == []
    assert Effect.objects.filter(kind=replies.EFFECT_KIND, key=f"turn:{receipt.pk}").exists()

    assert run_host(session_id) == "slept"
    Effect.objects.filter(kind=replies.EFFECT_KIND).update(due_at=timezone.now())
    outbox.drain(seconds=5)
    assert _app_replies(lark, "om_steer") == ["The release is cut."]
    sent = next(m for m in lark.state.lark_store.values() if m["sender"] == "app")
    assert sent["reply_in_thread"] is True  # topic_reply opens the message's topic
    assert lark.matching("GET", rf"/open-apis/im/v1/messages/{sent['message_id']}")
    reply = ConnectorReply.objects.get(receipt=receipt)
    assert (reply.state, reply.reply_ref) == ("replied", sent["message_id"])

    outbox.enqueue(replies.EFFECT_KIND, f"turn:{receipt.pk}", {"receipt": receipt.pk,
                                                                "turn": True})
    outbox.drain(seconds=5)  # replayed: nothing more
    assert _app_replies(lark, "om_steer") == ["The release is cut."]


def test_a_connector_without_a_reply_mode_sends_nothing(api, pi_agent, model_server,
                                                        lark):
    session_id, connector = _steered(api, lark, "none")
    model_server.script(Text("Only in the session."))
    _mention(connector, lark, "om_quiet", "anything?")
    assert not Effect.objects.filter(kind=replies.EFFECT_KIND).exists()
    assert run_host(session_id) == "slept"
    outbox.drain(seconds=3)
    assert not lark.matching("POST", r"/open-apis/im/v1/messages.*")
