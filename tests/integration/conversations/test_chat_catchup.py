"""A conversation-mode Lark source's history catch-up (issue 32, item 6): a mention sent
while no webhook arrived, read back by the real poll (lark-oapi's im/v1 message list
against the recording Lark server), starts the place's conversation exactly as the live
mention would have; the late webhook of it starts nothing more."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from conversations.models import Conversation
from intake import poll
from intake.models import Source, Trigger
from intake.sources.lark import Lark
from policy import services as policy_services
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.recording_server import RecordingServer

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]

TOKEN, BOT, ALICE = "v-token", "ou_bot", "ou_alice"
CHAT = "oc_team"
APP = "cli_conversation_catchup"  # lark-oapi caches tenant tokens per app id
T0 = int(time.time()) - 3600


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        srv.state.lark_app_id = APP
        yield srv


@pytest.fixture
def source(lark, openai_provider, session_dirs):
    from tickets.models import AgentSettings

    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "codex", "worker_provider": openai_provider,
        "worker_model": "gpt-5.5"})
    config = Lark.validate_config({"app_id": APP, "bot_open_id": BOT, "domain": lark.url,
                                   "groups": [CHAT], "conversation": "topic",
                                   "language": "en"})
    at = datetime.fromtimestamp(T0, UTC).isoformat()
    row = Source(kind="lark", slug="lk", name="Lark", config=config, health={"cursors": {
        f"chat:{CHAT}": {"value": at, "seen": [], "at": at}}})
    row.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    row.save()
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": [ALICE], "rows": {"group_configured": {"addressed": True}}}}}, None)
    return row


def test_a_caught_up_mention_starts_its_conversation_as_if_live(client, source, lark):
    lark.lark_message("om_down", chat_id=CHAT, create_time=(T0 + 10) * 1000,
                      text="@_user_1 what broke the nightly?", mentions=[(BOT, "amux")])
    assert poll.poll(source) == 1
    trigger = Trigger.objects.get(external_id="message:om_down")
    assert trigger.disposition == "started"
    conversation = Conversation.objects.get(source=source)
    assert conversation.chat_id == CHAT and conversation.started_by == ALICE

    late = message_event(token=TOKEN, chat_id=CHAT, text="@_user_1 what broke the nightly?",
                         sender=ALICE, mentions=[(BOT, "amux")], message_id="om_down",
                         app_id=APP)
    body, headers = sealed(late)
    answer = processed(client.post("/hooks/lark/lk", data=body,
                                   content_type="application/json", **headers))
    assert answer["outcome"] == "duplicate"
    assert Conversation.objects.count() == 1 and Trigger.objects.count() == 1
