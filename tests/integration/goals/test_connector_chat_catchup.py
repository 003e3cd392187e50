"""A Lark Bot connector's history catch-up (issue 32, item 6): a mention sent while no
webhook arrived is read back by the real poll (lark-oapi's im/v1 message list against the
recording Lark server) and reaches the agent's async inbox exactly as if it had arrived
live; the webhook copy of the same message changes nothing; the chat the connector names
is caught up even when the source no longer lists it among its groups."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from goals.models import Connector, InboxEvent, IngressReceipt
from intake import poll
from intake.models import Delivery, Source, Trigger
from intake.sources.lark import Lark
from policy import services as policy_services
from tests.integration.goals.conftest import add_agent
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.recording_server import RecordingServer
from tickets.models import Ticket

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]

TOKEN, BOT, ALICE = "v-token", "ou_bot", "ou_alice"
CHAT = "oc_team"
# lark-oapi caches a tenant token per app id for the process: this module's own app id
APP = "cli_goals_chat_catchup"
T0 = int(time.time()) - 3600


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        srv.state.lark_app_id = APP
        yield srv


@pytest.fixture
def source(lark):
    config = Lark.validate_config({"app_id": APP, "bot_open_id": BOT, "domain": lark.url,
                                   "groups": [CHAT]})
    row = Source(kind="lark", slug="lk", name="Lark", config=config, health={"cursors": {
        f"chat:{CHAT}": {"value": iso(T0), "seen": [], "at": iso(T0)}}})
    row.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    row.save()
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": [ALICE], "rows": {"group_configured": {"addressed": True}}}}}, None)
    return row


@pytest.fixture
def inbox(api, goal, source) -> Connector:
    add_agent(api, "builder")
    response = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
        "source": "lk", "source_ref": CHAT, "capture_scope": "mentions",
        "ingress_mode": "async_inbox", "reply_mode": "none"})
    assert response.status_code == 201, response.content
    return Connector.objects.get(pk=response.json()["id"])


def mentioned(lark, message_id: str, seconds: int, text: str) -> None:
    lark.lark_message(message_id, chat_id=CHAT, create_time=seconds * 1000,
                      text=f"@_user_1 {text}", mentions=[(BOT, "amux")])


def polled(source) -> int:
    source.refresh_from_db()
    return poll.poll(source)


def test_a_mention_sent_while_down_reaches_the_inbox_once(client, inbox, source, lark):
    mentioned(lark, "om_down", T0 + 10, "can you cut the release?")
    assert polled(source) == 1
    event = InboxEvent.objects.get(receipt__dedupe_key="om_down")
    receipt = IngressReceipt.objects.get(dedupe_key="om_down")
    assert (receipt.connector_id, receipt.outcome) == (inbox.pk, "inboxed")
    assert event.kind == "mention"
    trigger = Trigger.objects.get(external_id="message:om_down")
    assert trigger.disposition == "inboxed" and not Ticket.objects.exists()

    # Lark's late webhook of the same message: a duplicate, nothing delivered twice.
    late = message_event(token=TOKEN, chat_id=CHAT, text="@_user_1 can you cut the release?",
                         sender=ALICE, mentions=[(BOT, "amux")], message_id="om_down",
                         app_id=APP)
    body, headers = sealed(late)
    answer = processed(client.post("/hooks/lark/lk", data=body,
                                   content_type="application/json", **headers))
    assert answer["outcome"] == "duplicate"
    assert IngressReceipt.objects.filter(dedupe_key="om_down").count() == 1
    assert InboxEvent.objects.filter(receipt__dedupe_key="om_down").count() == 1
    assert polled(source) == 0


def test_the_connector_chat_is_caught_up_even_when_the_groups_drop_it(inbox, source, lark):
    config = {**source.config, "groups": []}
    Source.objects.filter(pk=source.pk).update(config=config)
    source.refresh_from_db()
    assert poll.chats(source) == [CHAT]
    # no longer a configured group: its mentions pass the gate as another group's would
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": [ALICE], "rows": {"group_other": {"addressed": True}}}}},
        policy_services.current().version)
    mentioned(lark, "om_1", T0 + 10, "is the release cut?")
    assert poll.poll_all() == 1
    assert Delivery.objects.get(delivery_id="poll:message:om_1").outcome == "admitted"
    assert Trigger.objects.get(external_id="message:om_1").scope == "group_other"
    assert IngressReceipt.objects.filter(dedupe_key="om_1", connector=inbox).exists()
