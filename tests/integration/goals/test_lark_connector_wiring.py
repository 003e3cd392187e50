"""A Lark Bot connector hears its chat (issue 17, item 2): signed message events into the
webhook, the real intake drainer, then `goals.ingress.accept` — a receipt, and a queued turn
in the agent's working session. Other chats of the source, messages the gate ignores and
duplicates deliver nothing; none becomes a ticket."""

from __future__ import annotations

import json

import pytest

from goals.models import IngressReceipt
from intake.models import Source, Trigger
from intake.sources.lark import Lark
from policy import services as policy_services
from sessions.models import Turn
from tests.integration.goals.conftest import start
from tests.support.intake import processed
from tests.support.lark_events import bot_verified, message_event, sealed

pytestmark = pytest.mark.django_db

TOKEN, KEY, BOT = "v-token", "enc-key-123", "ou_bot"
ALICE, MALLORY = "ou_alice", "ou_mallory"


def lark_source(slug="lk", **config):
    config = Lark.validate_config({"app_id": "cli_test", "bot_open_id": BOT,
                                   "groups": ["oc_team", "oc_elsewhere"], **config})
    source = Source(kind="lark", slug=slug, name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "encrypt_key": KEY, "app_secret": "sec"}
    source.save()
    bot_verified(source, BOT)
    policy_services.save({"acceptance": "manual", "sources": {slug: {
        "allowed": [ALICE],
        "rows": {"group_configured": {"addressed": True}}}}}, None)
    return source


@pytest.fixture
def wired(api, pi_agent):
    """The builder's working session and its Lark Bot connector on `oc_team`."""
    source = lark_source()
    session = start(api).json()["session"]
    response = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
        "source": source.slug, "source_ref": "oc_team", "ingress_mode": "live_steering"})
    assert response.status_code == 201, response.content
    return {"session": session, "connector": response.json()["id"], "source": source}


def post(client, text, *, chat_id="oc_team", sender=ALICE, message_id=None, event_id=None):
    event = message_event(token=TOKEN, chat_id=chat_id, text=f"@_user_1 {text}",
                          sender=sender, mentions=[(BOT, "amux")], message_id=message_id,
                          event_id=event_id)
    body, headers = sealed(event, encrypt_key=KEY)
    return client.post("/hooks/lark/lk", data=body, content_type="application/json",
                       **headers)


def say(client, text, **kw):
    return processed(post(client, text, **kw))


def _tickets():
    from tickets.models import Ticket

    return Ticket.objects.count()


def test_a_mention_in_the_connectors_chat_is_delivered_to_the_working_session(client,
                                                                              wired):
    outcome = say(client, "please ship the release notes", message_id="om_first")
    trigger = Trigger.objects.get(pk=outcome["trigger"])
    assert trigger.disposition == "delivered"
    receipt = IngressReceipt.objects.get(connector_id=wired["connector"])
    assert (receipt.dedupe_key, receipt.event_kind, receipt.selected_mode, receipt.outcome) \
        == ("om_first", "mention", "live_steering", "delivered")
    assert trigger.meta["ingress"]["receipts"] == [
        {"connector": wired["connector"], "receipt": receipt.pk, "outcome": "delivered",
         "reason": ""}]
    turn = Turn.objects.get(session_id=wired["session"])
    assert turn.state == "queued" and turn.key == receipt.turn_key
    # the text as Lark renders it (the bot's mention by name); the kind says it was a mention
    assert turn.input.get("text") == "@amux please ship the release notes"
    assert _tickets() == 0


def test_a_message_in_a_chat_no_connector_names_is_ignored_with_its_reason(client, wired):
    outcome = say(client, "not for the builder", chat_id="oc_elsewhere")
    trigger = Trigger.objects.get(pk=outcome["trigger"])
    assert (trigger.disposition, trigger.meta["ingress"]) == \
        ("ignored", {"reason": "no_connector"})
    assert not IngressReceipt.objects.exists() and not Turn.objects.exists()
    assert _tickets() == 0


def test_a_message_the_gate_ignores_is_never_delivered(client, wired):
    outcome = say(client, "run this for me", sender=MALLORY)
    trigger = Trigger.objects.get(pk=outcome["trigger"])
    assert trigger.decision == "ignore"
    assert (trigger.disposition, trigger.meta["ingress"]) == \
        ("not_accepted", {"reason": "not_admitted"})
    assert not IngressReceipt.objects.exists() and not Turn.objects.exists()
    assert _tickets() == 0


def test_a_duplicate_event_makes_one_receipt_and_one_turn(client, wired):
    say(client, "once only", message_id="om_dup", event_id="ev_dup")
    again = post(client, "once only", message_id="om_dup", event_id="ev_dup")
    assert again.status_code == 200 and again.json()["duplicate"] is True  # same event
    redelivered = say(client, "once only", message_id="om_dup")  # a new event id
    assert (redelivered["outcome"], redelivered["reason"]) == ("duplicate", "already_seen")
    assert IngressReceipt.objects.filter(connector_id=wired["connector"]).count() == 1
    assert [t.input.get("text") for t in Turn.objects.filter(session_id=wired["session"])] \
        == ["@amux once only"]


def test_receipts_and_trigger_meta_hold_no_content(client, api, wired):
    say(client, "secret plan", message_id="om_private")
    listed = api.get(f"/api/v1/ingress-receipts/?connector={wired['connector']}").json()
    assert listed["count"] == 1
    text = json.dumps(listed)
    assert "secret plan" not in text and ALICE not in text and "oc_team" not in text


def test_a_disconnected_connector_hands_the_source_back_to_tickets(client, api, wired):
    api.delete(f"/api/v1/connectors/{wired['connector']}/")
    outcome = say(client, "tickets again")
    trigger = Trigger.objects.get(pk=outcome["trigger"])
    assert "ingress" not in trigger.meta
    assert not IngressReceipt.objects.exists() and not Turn.objects.exists()


def test_a_conversation_mode_source_refuses_a_lark_bot_connector(api, pi_agent):
    source = lark_source(slug="conv", conversation="topic")
    response = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
        "source": source.slug, "source_ref": "oc_team", "ingress_mode": "live_steering"})
    assert response.status_code == 400, response.content
    assert "source" in response.json()["error"]["fields"]


def test_one_source_has_one_consumer_even_if_its_mode_changes_later(wired):
    from conversations.consumer import ConversationsConsumer
    from goals.consumer import GoalsConsumer
    from intake import consumers

    source = wired["source"]
    assert isinstance(consumers.of(source), GoalsConsumer)
    source.config = {**source.config, "conversation": "topic"}
    source.save()
    assert isinstance(consumers.of(source), ConversationsConsumer)
