"""Lark chat catch-up (issue 32, item 6): the messages of a source's configured chats sent
while no webhook arrived are read back by the real poll through lark-oapi's im/v1 message
list (against the recording Lark server, paged as Lark pages it), enter like their webhook
(one trigger per message id, whichever path brings it first), in order and bounded, and
each chat's cursor moves only past what is stored."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from intake import poll
from intake.models import Delivery, EventAck, Source, Trigger
from intake.sources import lark_history
from intake.sources.lark import Lark
from policy import services as policy_services
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.recording_server import RecordingServer

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]

TOKEN, BOT, ALICE = "v-token", "ou_bot", "ou_alice"
CHAT, ELSEWHERE = "oc_team", "oc_elsewhere"
# lark-oapi caches a tenant token per app id for the process: this module's own app id
APP = "cli_chat_catchup"
T0 = int(time.time()) - 3600  # where the chat's cursor stands: an hour ago
LIST = r"/open-apis/im/v1/messages"


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@pytest.fixture
def server():
    with RecordingServer() as srv:
        srv.state.lark_app_id = APP
        yield srv


def lark_source(server, groups=(CHAT,), cursors=None) -> Source:
    config = Lark.validate_config({"app_id": APP, "bot_open_id": BOT, "domain": server.url,
                                   "groups": list(groups)})
    source = Source(kind="lark", slug="lk", name="Lark", config=config,
                    health={"cursors": cursors if cursors is not None else {
                        f"chat:{c}": {"value": iso(T0), "seen": [], "at": iso(T0)}
                        for c in groups}})
    source.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    source.save()
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": [ALICE], "rows": {"group_configured": {"addressed": True}}}}}, None)
    return source


def said(server, message_id: str, seconds: int, text: str, *, mention=True, chat=CHAT):
    """A person's message in the chat at `seconds` (what Lark keeps, whether or not its
    event reached amux)."""
    server.lark_message(message_id, chat_id=chat, create_time=seconds * 1000,
                        text=f"@_user_1 {text}" if mention else text,
                        mentions=[(BOT, "amux")] if mention else ())


def cursor(source, chat=CHAT) -> dict:
    source.refresh_from_db()
    return source.health["cursors"][f"chat:{chat}"]


def polled(source) -> int:
    """The source's poll as the periodic task runs it (the row read fresh)."""
    source.refresh_from_db()
    return poll.poll(source)


def triggers() -> list[str]:
    return list(Trigger.objects.order_by("pk").values_list("external_id", flat=True))


def webhook(client, message_id: str, text: str):
    event = message_event(token=TOKEN, chat_id=CHAT, text=f"@_user_1 {text}", sender=ALICE,
                          mentions=[(BOT, "amux")], message_id=message_id, app_id=APP)
    body, headers = sealed(event)
    return processed(client.post("/hooks/lark/lk", data=body, content_type="application/json",
                                 **headers))


def test_a_chat_seen_first_starts_from_now_and_then_catches_up(server):
    source = lark_source(server, cursors={})
    server.state.lark_chats.add(CHAT)
    said(server, "om_before", int(time.time()) - 60, "history from before amux followed")
    assert polled(source) == 0  # the first poll only sets the cursor: nothing replayed
    start = cursor(source)
    assert start["seen"] == [] and not server.matching("GET", LIST)
    assert datetime.fromisoformat(start["value"]).timestamp() >= time.time() - 5
    said(server, "om_down", int(time.time()) + 1, "the deploy is stuck")
    assert polled(source) == 1
    assert triggers() == ["message:om_down"]


def test_messages_sent_while_down_become_triggers_in_order_and_the_cursor_moves(server):
    source = lark_source(server)
    said(server, "om_old", T0 - 30, "before the cursor")
    said(server, "om_1", T0 + 10, "the build is red")
    said(server, "om_2", T0 + 20, "lunch is at noon", mention=False)
    said(server, "om_3", T0 + 20, "and please bump the version")  # the same second
    server.lark_message("om_mine", chat_id=CHAT, sender="app", create_time=(T0 + 30) * 1000,
                        text="On it")  # the bot's own message: no trigger
    assert polled(source) == 4
    assert triggers() == ["message:om_1", "message:om_2", "message:om_3"]
    first = Trigger.objects.get(external_id="message:om_1")
    assert (first.scope, first.actor, first.addressed, first.decision) == (
        "group_configured", ALICE, True, "explicit")  # the gate took it as if live
    assert first.text == "@amux the build is red" and first.disposition
    assert Trigger.objects.get(external_id="message:om_2").addressed is False
    own = Delivery.objects.get(delivery_id="poll:message:om_mine")
    assert (own.outcome, own.reason, own.headers) == (
        "ignored", "own_message", {"x-amux-poll": "chat_history"})
    assert cursor(source)["value"] == iso(T0 + 30) and cursor(source)["seen"] == ["om_mine"]
    assert set(EventAck.objects.values_list("state", flat=True)) == {"acked"}
    listed = server.matching("GET", LIST)[0].query
    assert (listed["container_id_type"], listed["container_id"], listed["sort_type"],
            listed["start_time"]) == (["chat"], [CHAT], ["ByCreateTimeAsc"], [str(T0)])
    # Nothing new: the next poll reads from the committed cursor and stores nothing.
    assert polled(source) == 0 and Delivery.objects.count() == 4
    assert server.matching("GET", LIST)[-1].query["start_time"] == [str(T0 + 30)]
    said(server, "om_4", T0 + 30, "one more in that second")
    assert polled(source) == 1 and triggers()[-1] == "message:om_4"
    assert cursor(source)["seen"] == ["om_mine", "om_4"]


def test_a_message_the_webhook_brought_is_stored_once(client, server):
    source = lark_source(server)
    said(server, "om_live", T0 + 10, "restart the worker")
    assert webhook(client, "om_live", "restart the worker")["outcome"] == "admitted"
    said(server, "om_missed", T0 + 20, "and check the logs")
    assert polled(source) == 2
    assert triggers() == ["message:om_live", "message:om_missed"]
    copy = Delivery.objects.get(delivery_id="poll:message:om_live")
    assert (copy.outcome, copy.trigger_id) == ("duplicate", None)
    assert EventAck.objects.get(item="om_live").outcome == "already_seen"
    assert cursor(source)["value"] == iso(T0 + 20)
    # The other way round: the poll first, then the webhook Lark retried late.
    assert webhook(client, "om_missed", "and check the logs")["outcome"] == "duplicate"
    assert Trigger.objects.filter(external_id="message:om_missed").count() == 1


def test_the_catch_up_is_bounded_in_messages_and_age(server, monkeypatch):
    monkeypatch.setattr(lark_history, "CHAT_CATCHUP_MESSAGES", 3)
    monkeypatch.setattr(lark_history, "CHAT_PAGE", 2)  # Lark's paging: has_more, page_token
    source = lark_source(server)
    for i in range(5):
        said(server, f"om_{i}", T0 + 10 + i, f"item {i}")
    assert polled(source) == 3
    assert triggers() == ["message:om_0", "message:om_1", "message:om_2"]
    assert cursor(source)["value"] == iso(T0 + 12)  # just after the last one stored
    pages = [r.query.get("page_token") for r in server.matching("GET", LIST)]
    assert pages == [None, ["2"]]  # the third message was on the second page
    assert polled(source) == 2  # the rest with the next poll
    assert triggers()[3:] == ["message:om_3", "message:om_4"]

    # Down longer than the window: what is older than a week is not replayed.
    week = lark_history.CHAT_CATCHUP_SECONDS
    now = int(time.time())
    stale = {"value": iso(now - week - 3 * 86400), "seen": [], "at": iso(now)}
    Source.objects.filter(pk=source.pk).update(health={"cursors": {f"chat:{CHAT}": stale}})
    said(server, "om_ancient", now - week - 86400, "too old")
    said(server, "om_recent", now - 86400, "still wanted")
    assert polled(source) == 1 and triggers()[-1] == "message:om_recent"
    assert len(triggers()) == 6  # the five taken before are not taken twice
    since = int(server.matching("GET", LIST)[-1].query["start_time"][0])
    assert now - week <= since <= now - week + 5
    # past the recent message and the ones taken before (read again, not taken twice)
    assert cursor(source)["value"] == iso(T0 + 14)
    assert source.health["rejected"] == {"chat_history_beyond_window": 1}  # said once
    assert polled(source) == 0
    source.refresh_from_db()
    assert source.health["rejected"] == {"chat_history_beyond_window": 1}


def test_a_chat_the_bot_is_not_in_is_refused_as_lark_refuses_and_the_others_go_on(server):
    source = lark_source(server, groups=(CHAT, ELSEWHERE))
    said(server, "om_1", T0 + 10, "the build is red")
    assert polled(source) == 1
    source.refresh_from_db()
    assert source.health["last_error"]["reason"] == "chat_poll_failed"
    assert "code 230002" in source.health["last_error"]["message"]
    assert cursor(source, ELSEWHERE)["value"] == iso(T0)  # kept where it was
    assert cursor(source)["value"] == iso(T0 + 10)
    assert triggers() == ["message:om_1"]


def test_the_periodic_poll_task_catches_up_chats_of_a_lark_source(server):
    from intake.tasks import poll_sources

    source = lark_source(server)
    said(server, "om_1", T0 + 10, "the build is red")
    assert Lark(source.config, source.secrets).catches_up()
    assert not Lark(source.config).catches_up()  # without the app secret nothing is read
    assert poll_sources() == 1 and triggers() == ["message:om_1"]  # what beat runs
    assert cursor(source)["value"] == iso(T0 + 10)


def test_a_caught_up_message_gets_no_document_comment_receipt(server):
    source = lark_source(server)
    config = {**source.config, "comment_receipt": "Received: amux is on it."}
    Source.objects.filter(pk=source.pk).update(config=config)
    said(server, "om_1", T0 + 10, "the build is red")
    assert polled(source) == 1
    ack = EventAck.objects.get(item="om_1")
    assert (ack.state, ack.outcome) == ("acked", "no_response")
    assert not server.matching("POST", r"/open-apis/im/v1/messages.*")
    assert cursor(source)["value"] == iso(T0 + 10)


def test_replies_inside_topics_are_caught_up_in_order_with_the_chat(client, server):
    """Lark lists a topic's replies only per topic: the topics amux knows in the chat, and
    those that start in the chat's list, are read too, merged by time under one cursor."""
    source = lark_source(server)
    server.lark_message("om_root", chat_id=CHAT, thread_id="omt_known",
                        create_time=(T0 - 100) * 1000, text="@_user_1 the release plan",
                        mentions=[(BOT, "amux")])
    live = message_event(token=TOKEN, chat_id=CHAT, text="@_user_1 the release plan",
                         sender=ALICE, mentions=[(BOT, "amux")], message_id="om_root",
                         thread_id="omt_known", app_id=APP)
    body, headers = sealed(live)
    processed(client.post("/hooks/lark/lk", data=body, content_type="application/json",
                          **headers))  # a topic amux knows
    server.lark_message("om_in_known", chat_id=CHAT, thread_id="omt_known", root_id="om_root",
                        create_time=(T0 + 20) * 1000, text="@_user_1 and the changelog",
                        mentions=[(BOT, "amux")])
    said(server, "om_plain", T0 + 25, "unrelated", mention=False)
    server.lark_message("om_new", chat_id=CHAT, thread_id="omt_new",
                        create_time=(T0 + 30) * 1000, text="@_user_1 a new topic",
                        mentions=[(BOT, "amux")])
    server.lark_message("om_in_new", chat_id=CHAT, thread_id="omt_new", root_id="om_new",
                        create_time=(T0 + 40) * 1000, text="@_user_1 its first reply",
                        mentions=[(BOT, "amux")])
    assert polled(source) == 4
    assert triggers() == ["message:om_root", "message:om_in_known", "message:om_plain",
                          "message:om_new", "message:om_in_new"]
    reply = Delivery.objects.get(delivery_id="poll:message:om_in_known")
    assert reply.mailbox == f"lk:{CHAT}:om_root"  # the webhook's mailbox for that topic
    assert cursor(source)["value"] == iso(T0 + 40)
    topics = [r.query for r in server.matching("GET", LIST)
              if r.query["container_id_type"] == ["thread"]]
    assert sorted(q["container_id"][0] for q in topics) == ["omt_known", "omt_new"]
    assert all("start_time" not in q for q in topics)  # a topic takes no time range
