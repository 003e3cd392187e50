"""The long-connection receiver: events dispatched by lark-oapi's own handler (the path the
WebSocket client uses) enter intake like webhook events."""

from __future__ import annotations

import json

import pytest

from tests.support.lark_events import message_event
from tickets.lark_receiver import event_handler
from tickets.models import Delivery, Source, Trigger
from tickets.sources.lark import Lark

pytestmark = pytest.mark.django_db


@pytest.fixture
def lark():
    config = Lark.validate_config({"app_id": "cli_test", "bot_open_id": "ou_bot",
                                   "groups": ["oc_team"], "receiver": "long_connection"})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": "v", "app_secret": "s"}
    source.save()
    return source


def test_sdk_dispatched_message_becomes_a_trigger_once(lark):
    handler = event_handler("lk")
    event = message_event(token="", chat_id="oc_team", text="@_user_1 hi",
                          mentions=[("ou_bot", "amux")], message_id="om_ws1")
    handler._do_without_validation(json.dumps(event).encode())
    trigger = Trigger.objects.get()
    assert trigger.scope == "group_configured" and trigger.addressed
    assert trigger.external_id == "message:om_ws1"
    # A reconnect backfill: same message, new event id.
    event["header"]["event_id"] = "another"
    handler._do_without_validation(json.dumps(event).encode())
    assert Trigger.objects.count() == 1 and Delivery.objects.count() == 2
