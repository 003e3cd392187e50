"""Lark as the conversational entry (issue 16): a topic bound to one agent session, web and
Lark inputs in one order, the bot-wide singleton, and what a conversation-mode source does
not do (tickets, sessions for people the policy does not admit).

Real things only: signed events into the webhook, the real intake drainer, the real outbox
drainer, lark-oapi against the recording Lark server (the source's `domain`), and the real
Codex app-server driven by the scripted model server in a session host of this process.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from conversations.models import Conversation, TurnReply
from effects import outbox
from intake.models import Source, Trigger
from policy import services as policy_services
from sessions.models import Session, TimelineEvent, Turn
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.model_server import Text, ToolCall
from tests.support.recording_server import RecordingServer
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]

TOKEN, KEY, BOT = "v-token", "enc-key-123", "ou_bot"
ALICE, BOB, MALLORY = "ou_alice", "ou_bob", "ou_mallory"


@pytest.fixture
def lark_server():
    with RecordingServer() as server:
        yield server


@pytest.fixture
def worker_settings(openai_provider):
    """No Bot Profile exists: sessions start from the agent settings' worker."""
    from tickets.models import AgentSettings

    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "codex", "worker_provider": openai_provider,
        "worker_model": "gpt-5.5"})


def lark_source(server, mode="topic", slug="lk"):
    from intake.sources.lark import Lark

    config = Lark.validate_config({
        "app_id": "cli_test", "bot_open_id": BOT, "domain": server.url,
        "groups": ["oc_team"], "receive_all": ["oc_team"], "conversation": mode,
        "language": "en"})
    source = Source(kind="lark", slug=slug, name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "encrypt_key": KEY, "app_secret": "sec"}
    source.save()
    policy_services.save({"acceptance": "manual", "sources": {slug: {
        "allowed": [ALICE, BOB],
        "rows": {"group_configured": {"addressed": True}, "direct": {"addressed": True},
                 "group_other": {"addressed": True}}}}}, None)
    return source


def say(client, server, *, text, message_id, chat_id="oc_team", thread_id="", root_id="",
        sender=ALICE, mention=True, chat_type="group", slug="lk"):
    """A person writes in Lark: the message exists there, and its event arrives signed."""
    server.lark_message(message_id, chat_id=chat_id, thread_id=thread_id, root_id=root_id,
                        sender=sender, text=text)
    event = message_event(token=TOKEN, chat_id=chat_id, chat_type=chat_type,
                          text=("@_user_1 " if mention else "") + text, sender=sender,
                          mentions=[(BOT, "amux")] if mention else (),
                          message_id=message_id, root_id=root_id, thread_id=thread_id)
    body, headers = sealed(event, encrypt_key=KEY)
    response = client.post(f"/hooks/lark/{slug}", data=body, content_type="application/json",
                           **headers)
    return processed(response)


class Host:
    """The session's host in a thread of this process, as a runtime worker runs it: it
    sleeps once idle, and the next input wakes it (here, `wake` starts it again, as the
    host task an input enqueues would)."""

    def __init__(self, session_id):
        Session.objects.filter(pk=session_id).update(idle_timeout_s=2)
        self.session_id = session_id
        self.result = {}
        self.thread = None
        self.wake()

    def wake(self):
        if self.thread is not None and self.thread.is_alive():
            return
        if self.thread is not None:
            self.join()
        self.result = {}
        self.thread = threading.Thread(
            target=lambda: self.result.setdefault("outcome", run_host(self.session_id)))
        self.thread.start()

    def join(self):
        self.thread.join(120)
        assert self.result.get("outcome") == "slept", self.result


def turn_state(session_id, seq):
    return Turn.objects.filter(session_id=session_id, seq=seq).values_list(
        "state", flat=True).first()


def drain_until(predicate, timeout=60):
    """The real outbox drainer, run until what the test waits for is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outbox.drain(seconds=2)
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError("outbox never got there")


def card_of(server, turn):
    reply = TurnReply.objects.filter(turn=turn).first()
    if reply is None or not reply.message_id:
        return None
    return server.state.lark_store[reply.message_id]


def card_text(msg) -> str:
    card = json.loads(msg["content"])
    return " ".join(el.get("content", "") for el in card["body"]["elements"]) + " | " + \
        card["header"]["title"]["content"]


def final_card(server, turn):
    def done():
        reply = TurnReply.objects.filter(turn=turn).first()
        return reply is not None and reply.final and card_of(server, turn)
    return drain_until(done)


def run_turn(server, host, seq):
    """Wait for turn `seq` to start (waking the host if it went to sleep first), post its
    card ("working"), then wait for its end and its final card: the card is patched in
    place, never posted again."""
    session_id = host.session_id

    def started():
        host.wake()
        return turn_state(session_id, seq) in ("running", "completed")

    wait_for(started, timeout=90)
    turn = Turn.objects.get(session_id=session_id, seq=seq)
    first = drain_until(lambda: card_of(server, turn))
    working = card_text(first)
    wait_for(lambda: turn_state(session_id, seq) == "completed", timeout=90)
    msg = final_card(server, turn)
    return turn, working, msg


def test_a_topic_is_one_session_across_three_messages(client, lark_server, worker_settings,
                                                      session_dirs, model_server):
    lark_source(lark_server)
    model_server.script(ToolCall("echo hi > out.txt"), Text("first answer", delay=2),
                        Text("second answer", delay=2), Text("third answer", delay=2))
    # the message that starts the topic: a thread id, no root id
    outcome = say(client, lark_server, text="write out.txt", message_id="om_1",
                  thread_id="omt_1")
    assert outcome["outcome"] == "admitted"
    conversation = Conversation.objects.get()
    assert (conversation.mode, conversation.chat_id, conversation.thread_key) == (
        "topic", "oc_team", "omt_1")
    session = conversation.session
    assert session.mirrored and session.runtime == "codex" and session.model == "gpt-5.5"
    host = Host(session.pk)
    try:
        turn1, working1, card1 = run_turn(lark_server, host, 1)
        # replies in the topic carry both ids; no mention needed: the group receives all
        for seq, mid in ((2, "om_2"), (3, "om_3")):
            outcome = say(client, lark_server, text=f"follow-up {seq}", message_id=mid,
                          thread_id="omt_1", root_id="om_1", mention=False)
            assert outcome["outcome"] == "admitted", outcome
            run_turn(lark_server, host, seq)
    finally:
        host.join()
    assert "Working" in working1 and card1["updates"] >= 1
    assert "first answer" in card_text(card1) and "Answer" in card_text(card1)
    # one session, three turns in order, each from its Lark message
    turns = list(Turn.objects.filter(session=session).order_by("seq"))
    assert [t.state for t in turns] == ["completed"] * 3
    assert [t.origin["message_id"] for t in turns] == ["om_1", "om_2", "om_3"]
    # the bot's mention is how it was called, not part of the input
    assert [t.input["text"] for t in turns] == ["write out.txt", "follow-up 2", "follow-up 3"]
    assert all(t.origin["via"] == "lark" and t.origin["conversation"] == conversation.pk
               for t in turns)
    assert Session.objects.count() == 1 and Conversation.objects.count() == 1
    assert list(Trigger.objects.order_by("pk").values_list("disposition", flat=True)) == [
        "started", "follow_up", "follow_up"]
    # each turn: exactly one Lark message, a reply in the topic, patched to its answer
    cards = lark_server.lark_cards("oc_team")
    assert len(cards) == 3
    assert [c["parent_id"] for c in cards] == ["om_1", "om_2", "om_3"]
    assert all(c["thread_id"] == "omt_1" and c["reply_in_thread"] for c in cards)
    assert all(c["updates"] >= 1 for c in cards)
    assert [c["card"]["body"]["elements"][0]["content"] for c in cards] == [
        "first answer", "second answer", "third answer"]
    assert all(c["card"]["config"]["update_multi"] and c["card"]["schema"] == "2.0"
               for c in cards)
    # the topic shows the people's messages and the answers in one order
    topic = [m["message_id"] if m["sender"] != "app" else m["parent_id"] + ":card"
             for m in lark_server.lark_chat("oc_team", "omt_1")]
    assert topic == ["om_1", "om_1:card", "om_2", "om_2:card", "om_3", "om_3:card"]
    from tickets.models import Eval, Ticket

    assert not Ticket.objects.exists() and not Eval.objects.exists()  # sessions, not tickets


def test_web_and_lark_inputs_share_one_order(client, api, operator, lark_server,
                                             worker_settings, session_dirs, model_server):
    """Lark messages, the REST API and the panel's message form feed one session: the
    timeline has one order of inputs, each with where it came from, and the topic shows
    the turns in that order."""
    lark_source(lark_server)
    model_server.script(Text("to lark one", delay=1), Text("to the api", delay=1),
                        Text("to the panel", delay=1), Text("to lark two", delay=1))
    say(client, lark_server, text="first from lark", message_id="om_a", thread_id="omt_a")
    session = Conversation.objects.get().session
    host = Host(session.pk)
    try:
        run_turn(lark_server, host, 1)
        response = api.post(f"/api/v1/sessions/{session.pk}/messages",
                            {"text": "then from the api"}, format="json")
        assert response.status_code == 202, response.content
        run_turn(lark_server, host, 2)
        # the session page's message form (what an operator types in the panel)
        client.force_login(operator)
        panel = client.post(f"/panel/sessions/{session.pk}/message/",
                            {"text": "then from the panel"})
        assert panel.status_code == 200 and "Queued as turn 3" in panel.content.decode()
        run_turn(lark_server, host, 3)
        say(client, lark_server, text="again from lark", message_id="om_b",
            thread_id="omt_a", root_id="om_a", mention=False)
        run_turn(lark_server, host, 4)
    finally:
        host.join()
    expected = [("first from lark", "lark"), ("then from the api", "api"),
                ("then from the panel", "web"), ("again from lark", "lark")]
    queued = list(TimelineEvent.objects.filter(session=session, type="turn.queued")
                  .order_by("seq").values_list("payload", flat=True))
    assert [(q["text"], q["origin"]["via"]) for q in queued] == expected
    assert queued[2]["origin"]["actor"] == operator.get_username()
    # the turns ran in that order, one after the other, each ended once
    turns = list(Turn.objects.filter(session=session).order_by("seq"))
    assert [(t.input["text"], t.origin["via"], t.state) for t in turns] == [
        (text, via, "completed") for text, via in expected]
    bounds = [(TimelineEvent.objects.get(turn=t, type="turn.started").seq,
               TimelineEvent.objects.get(turn=t, type="turn.completed").seq) for t in turns]
    assert all(a < b for a, b in bounds)
    assert all(bounds[i][1] < bounds[i + 1][0] for i in range(len(bounds) - 1))
    # the timeline as a client reads it (the panel's websocket replays the same events)
    timeline = api.get(f"/api/v1/sessions/{session.pk}/timeline?after=0").json()
    events = timeline["results"] if isinstance(timeline, dict) else timeline
    assert [e["payload"]["text"] for e in events if e["type"] == "turn.queued"] == [
        text for text, _ in expected]
    cards = lark_server.lark_cards("oc_team")
    assert len(cards) == 4 and all(c["thread_id"] == "omt_a" for c in cards)
    texts = [" ".join(el["content"] for el in c["card"]["body"]["elements"]) for c in cards]
    assert "to lark one" in texts[0]
    assert "then from the api" in texts[1] and "to the api" in texts[1]  # quoted, answered
    assert "then from the panel" in texts[2] and "to the panel" in texts[2]
    assert "to lark two" in texts[3]
    # the topic's order is the timeline's
    topic = [m["message_id"] if m["sender"] != "app" else "card"
             for m in lark_server.lark_chat("oc_team", "omt_a")]
    assert topic == ["om_a", "card", "card", "card", "om_b", "card"]


def test_singleton_shares_one_session_across_chats(client, lark_server, worker_settings,
                                                   session_dirs, model_server):
    lark_source(lark_server, mode="singleton")
    model_server.script(Text("hello team", delay=1), Text("hello bob", delay=1))
    say(client, lark_server, text="hi from the group", message_id="om_g")
    session = Conversation.objects.get().session
    host = Host(session.pk)
    try:
        run_turn(lark_server, host, 1)
        say(client, lark_server, text="hi in private", message_id="om_d", chat_id="oc_dm",
            chat_type="p2p", sender=BOB, mention=False)
        run_turn(lark_server, host, 2)
    finally:
        host.join()
    assert Conversation.objects.count() == 1 and Session.objects.count() == 1
    conversation = Conversation.objects.get()
    assert (conversation.mode, conversation.chat_id, conversation.thread_key) == (
        "singleton", "", "")
    team, dm = lark_server.lark_cards("oc_team"), lark_server.lark_cards("oc_dm")
    assert [c["parent_id"] for c in team] == ["om_g"] and [c["parent_id"] for c in dm] == [
        "om_d"]
    assert "hello team" in card_text(team[0]) and "hello bob" in card_text(dm[0])
    assert not dm[0]["reply_in_thread"]  # a direct chat has no topics


def test_people_the_policy_does_not_admit_start_nothing(client, lark_server, worker_settings):
    lark_source(lark_server)
    refused = say(client, lark_server, text="do something", message_id="om_x",
                  thread_id="omt_x", sender=MALLORY)
    assert (refused["outcome"], refused["reason"]) == ("ignored", "not_allowed")
    unaddressed = say(client, lark_server, text="just chatting", message_id="om_y",
                      thread_id="omt_y", mention=False)
    assert unaddressed["outcome"] == "ignored"
    assert not Conversation.objects.exists() and not Session.objects.exists()
    assert not lark_server.lark_cards()
    from tickets.models import Ticket

    assert not Ticket.objects.exists()
    assert set(Trigger.objects.values_list("disposition", flat=True)) == {"ignored"}


def test_a_follow_up_from_someone_not_admitted_is_not_posted(client, lark_server,
                                                              worker_settings):
    lark_source(lark_server)
    say(client, lark_server, text="start", message_id="om_1", thread_id="omt_1")
    session = Conversation.objects.get().session
    outcome = say(client, lark_server, text="me too", message_id="om_2", thread_id="omt_1",
                  root_id="om_1", sender=MALLORY, mention=False)
    assert (outcome["outcome"], outcome["reason"]) == ("ignored", "not_allowed")
    assert Turn.objects.filter(session=session).count() == 1


def test_no_bot_profile_and_no_worker_settings_starts_nothing(client, lark_server, db):
    lark_source(lark_server)
    outcome = say(client, lark_server, text="hello", message_id="om_1", thread_id="omt_1")
    assert outcome["outcome"] == "admitted"
    trigger = Trigger.objects.get()
    assert trigger.disposition == "not_started" and trigger.meta["conversation"] == "no_agent"
    assert not Session.objects.exists() and not Conversation.objects.exists()


def test_a_bot_profile_preset_chooses_how_the_session_runs(client, lark_server,
                                                          openai_provider, session_dirs):
    from execution.models import BotProfile, LaunchPreset

    preset = LaunchPreset.objects.create(slug="chat", runtime="codex", model="gpt-5.5",
                                         provider=openai_provider, permission="ask")
    BotProfile.objects.create(slug="helper", name="Helper", launch_preset=preset)
    lark_source(lark_server)
    say(client, lark_server, text="hello", message_id="om_1", thread_id="omt_1")
    session = Conversation.objects.get().session
    assert session.snapshot["execution"]["preset"] == "chat"
    assert session.snapshot["permission_mode"] == "ask"


def test_conversation_config_is_validated(api, lark_server):
    body = {"kind": "lark", "slug": "lk2", "name": "Lark",
            "config": {"app_id": "cli_x", "conversation": "chatty"},
            "secrets": {"verification_token": "t"}}
    response = api.post("/api/v1/sources/", body, format="json")
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert "config.conversation" in fields and "topic" in str(fields["config.conversation"])
    body["config"]["conversation"] = "topic"
    response = api.post("/api/v1/sources/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["config"]["conversation"] == "topic"
    body = {**body, "slug": "lk3", "config": {"app_id": "cli_x", "language": "fr"}}
    response = api.post("/api/v1/sources/", body, format="json")
    assert response.status_code == 400
    assert "config.language" in response.json()["error"]["fields"]


def test_the_panel_edits_the_conversation_mode(client, operator):
    client.force_login(operator)
    form = client.get("/panel/sources/new/lark").content.decode()
    assert '<select id="f-conversation" name="conversation">' in form
    assert '<option value="topic">topic</option>' in form
    data = {"name": "Lark", "slug": "lk", "enabled": "on", "app_id": "cli_p",
            "domain": "https://open.larksuite.com", "receiver": "webhook",
            "freshness_seconds": "300", "conversation": "singleton", "language": "",
            "secret_verification_token": "vt", "secret_app_secret": "as"}
    assert client.post("/panel/sources/new/lark/", data).status_code == 302
    source = Source.objects.get(slug="lk")
    assert source.config["conversation"] == "singleton"
    edit = client.get("/panel/sources/lk/edit/").content.decode()
    assert '<option value="singleton" selected>singleton</option>' in edit
    bad = client.post("/panel/sources/lk/edit/", {**data, "conversation": "chatty"})
    assert bad.status_code == 400 and "must be one of off, topic, singleton" in \
        bad.content.decode()
