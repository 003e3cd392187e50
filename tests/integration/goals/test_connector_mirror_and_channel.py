"""Issue 17's last two items. A Lark Bot connector with reply_mode configured_mirror names
its mirror chat (one of the Lark source's configured groups, checked when it is created
or changed): an inbox settle's reply and a steered turn's final answer are posted there
through lark-oapi, read back from the recording Lark server before the event is ACKed,
once per receipt. And the goal page's channel selection: a Lark Bot connection listens on
another of its source's configured chats through an explicit operation
(``POST connectors/<id>/channel``, or the goal page's form), which changes neither the
agent's mode and session nor the goal's todos."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from goals import ingress, replies
from goals.models import Connector, ConnectorReply, InboxEvent, IngressReceipt
from intake.models import Source
from intake.sources.lark import Lark
from policy import services as policy_services
from sessions.models import Session, Turn
from tests.integration.goals.conftest import add_agent, start
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.model_server import Text
from tests.support.recording_server import RecordingServer
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

TOKEN, KEY, BOT, ALICE = "v-token", "enc-key-mirror", "ou_bot", "ou_alice"
CHAT, MIRROR, OTHER, STRANGER = "oc_work", "oc_mirror", "oc_other", "oc_unconfigured"
# lark-oapi caches a tenant token per app id for the process: this module's own app id
APP = "cli_goals_mirror"
AGENT = "/api/v1/goals/ship/agents/builder/"
PAGE = "/panel/sessions/goals/ship/"


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        srv.state.lark_chats.update({CHAT, MIRROR, OTHER})  # the bot is in these chats
        yield srv


@pytest.fixture
def source(lark) -> Source:
    config = Lark.validate_config({"app_id": APP, "bot_open_id": BOT, "domain": lark.url,
                                   "groups": [CHAT, MIRROR, OTHER]})
    row = Source(kind="lark", slug="lm", name="Lark", config=config)
    row.secrets = {"verification_token": TOKEN, "encrypt_key": KEY, "app_secret": "sec"}
    row.save()
    policy_services.save({"acceptance": "manual", "sources": {"lm": {
        "allowed": [ALICE], "rows": {"group_configured": {"addressed": True}}}}}, None)
    return row


def connector_post(api, **body):
    data = {"goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
            "source": "lm", "source_ref": CHAT, "ingress_mode": "async_inbox", **body}
    return api.post("/api/v1/connectors/", data)


def connector(api, **body) -> Connector:
    response = connector_post(api, **body)
    assert response.status_code == 201, response.content
    return Connector.objects.get(pk=response.json()["id"])


def mention(client, lark, text: str, message_id: str, chat: str = CHAT):
    """A person's mention of the bot: Lark has it, and its signed event goes through the
    webhook and the real intake drainer (and goals' consumer routes it by chat)."""
    lark.lark_message(message_id, chat_id=chat, text=f"@_user_1 {text}")
    event = message_event(token=TOKEN, chat_id=chat, text=f"@_user_1 {text}", sender=ALICE,
                          mentions=[(BOT, "amux")], message_id=message_id, app_id=APP)
    body, headers = sealed(event, encrypt_key=KEY)
    processed(client.post("/hooks/lark/lm", data=body, content_type="application/json",
                          **headers))
    return IngressReceipt.objects.filter(dedupe_key=message_id).first()


def app_messages(lark, chat: str) -> list[dict]:
    return [m for m in lark.state.lark_store.values()
            if m["sender"] == "app" and m["chat_id"] == chat]


def texts(messages: list[dict]) -> list[str]:
    return [json.loads(m["content"])["text"] for m in messages]


def error(response) -> tuple[int, str, list[str]]:
    body = response.json()["error"]
    return response.status_code, body["code"], sorted(body["fields"])


# ------------------------------------------------------------------ mirror config
def test_a_mirror_must_be_one_of_the_sources_configured_chats(api, goal, source):
    add_agent(api, "builder")
    missing = connector_post(api, reply_mode="configured_mirror")
    assert error(missing) == (400, "invalid", ["mirror_ref"])
    unknown = connector_post(api, reply_mode="configured_mirror", mirror_ref=STRANGER)
    assert error(unknown) == (400, "invalid", ["mirror_ref"])
    assert "configured groups" in unknown.json()["error"]["message"]
    stray = connector_post(api, reply_mode="source_thread", mirror_ref=MIRROR)
    assert error(stray) == (400, "invalid", ["mirror_ref"])
    assert not Connector.objects.exists()  # nothing half-written

    row = connector(api, reply_mode="source_thread")
    url = f"/api/v1/connectors/{row.pk}/"
    assert error(api.patch(url, {"reply_mode": "configured_mirror"}, format="json")) == (
        400, "invalid", ["mirror_ref"])
    assert error(api.patch(url, {"reply_mode": "configured_mirror", "mirror_ref": STRANGER},
                           format="json")) == (400, "invalid", ["mirror_ref"])
    row.refresh_from_db()
    assert (row.reply_mode, row.mirror_ref) == ("source_thread", "")

    changed = api.patch(url, {"reply_mode": "configured_mirror", "mirror_ref": MIRROR},
                        format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["reply_mode"], changed.json()["mirror_ref"]) == (
        "configured_mirror", MIRROR)
    # another mirror; then leaving configured_mirror drops it
    assert api.patch(url, {"mirror_ref": OTHER}, format="json").json()["mirror_ref"] == OTHER
    back = api.patch(url.rstrip("/"), {"reply_mode": "topic_reply"}, format="json")
    assert (back.status_code, back.json()["mirror_ref"]) == (200, "")
    row.refresh_from_db()
    assert (row.reply_mode, row.mirror_ref, row.ingress_mode, row.source_ref, row.state) == (
        "topic_reply", "", "async_inbox", CHAT, "listening")
    # a kind that cannot mirror says so
    web = api.post("/api/v1/connectors/", {"goal": "ship", "agent": "builder",
                                           "source_kind": "web_chat",
                                           "ingress_mode": "live_steering"}).json()
    assert error(api.patch(f"/api/v1/connectors/{web['id']}/",
                           {"reply_mode": "configured_mirror", "mirror_ref": MIRROR},
                           format="json")) == (400, "invalid", ["reply_mode"])


# ------------------------------------------------------------- mirror replies (inbox)
def test_a_settled_reply_goes_to_the_mirror_chat_once_and_acks_after_read_back(
        api, client, goal, lark, source):
    add_agent(api, "builder")
    connector(api, reply_mode="configured_mirror", mirror_ref=MIRROR)
    receipt = mention(client, lark, "is the release cut?", "om_ask")
    assert receipt is not None and receipt.outcome == "inboxed"
    event = InboxEvent.objects.get(receipt=receipt)

    drained = api.post(AGENT + "inbox/drain/", {}).json()
    assert [e["id"] for e in drained["events"]] == [event.pk]
    settled = api.post(AGENT + f"inbox/{event.pk}/settle/", {
        "key": drained["key"], "reply": "Cut at noon.",
        "effect": {"kind": "no_follow_up", "rationale": "answered"}}, format="json")
    assert settled.status_code == 200, settled.content
    assert settled.json()["state"] == "replying"
    assert app_messages(lark, MIRROR) == []  # not sent in the settle's transaction
    event.refresh_from_db()
    assert event.state == "replying"

    outbox.drain(seconds=5)
    posted = app_messages(lark, MIRROR)
    assert texts(posted) == ["Cut at noon."]
    assert posted[0]["parent_id"] == "" and posted[0]["root_id"] == ""  # a new message
    assert app_messages(lark, CHAT) == []  # nothing in the source chat
    create = lark.matching("POST", r"/open-apis/im/v1/messages$")
    assert len(create) == 1 and create[0].body["receive_id"] == MIRROR
    assert create[0].query["receive_id_type"] == ["chat_id"]
    assert lark.matching("GET", rf"/open-apis/im/v1/messages/{posted[0]['message_id']}")
    event.refresh_from_db()
    assert (event.state, event.outcome) == ("acked", "replied")
    reply = ConnectorReply.objects.get(receipt=receipt)
    assert (reply.state, reply.reply_ref, reply.reply_to) == (
        "replied", posted[0]["message_id"], f"chat:{MIRROR}")

    # the reply asked for again, and the settle repeated: nothing more is sent
    outbox.enqueue(replies.EFFECT_KIND, f"reply:{receipt.pk}", {"receipt": receipt.pk})
    outbox.drain(seconds=5)
    again = api.post(AGENT + f"inbox/{event.pk}/settle/", {
        "key": drained["key"], "reply": "Cut at noon.",
        "effect": {"kind": "no_follow_up", "rationale": "answered"}}, format="json")
    assert again.status_code == 200
    outbox.drain(seconds=5)
    assert texts(app_messages(lark, MIRROR)) == ["Cut at noon."]
    assert len(lark.matching("POST", r"/open-apis/im/v1/messages$")) == 1


def test_a_mirror_reply_lark_does_not_show_is_retried_and_not_acked(
        api, client, goal, lark, source):
    add_agent(api, "builder")
    connector(api, reply_mode="configured_mirror", mirror_ref=MIRROR)
    receipt = mention(client, lark, "status?", "om_lost")
    event = InboxEvent.objects.get(receipt=receipt)
    key = api.post(AGENT + "inbox/drain/", {}).json()["key"]
    lark.state.lark_lose_sends = True  # answered as sent, then not shown
    assert api.post(AGENT + f"inbox/{event.pk}/settle/", {
        "key": key, "reply": "All green.",
        "effect": {"kind": "no_follow_up", "rationale": "status"}},
        format="json").status_code == 200
    outbox.drain(seconds=3)
    event.refresh_from_db()
    assert event.state == "replying" and event.acked_at is None
    assert ConnectorReply.objects.get(receipt=receipt).state == "pending"
    assert Effect.objects.filter(kind=replies.EFFECT_KIND, key=f"reply:{receipt.pk}").exists()


def test_a_mirror_chat_the_bot_is_not_in_is_refused_by_lark(api, client, goal, lark,
                                                            source):
    """The recording server answers like Lark: a new message into a chat the bot is not in
    is refused (230002). The reply is known gone: acknowledged as reply_gone, never shown."""
    lark.state.lark_chats.discard(MIRROR)
    add_agent(api, "builder")
    connector(api, reply_mode="configured_mirror", mirror_ref=MIRROR)
    receipt = mention(client, lark, "anyone?", "om_nobody")
    event = InboxEvent.objects.get(receipt=receipt)
    key = api.post(AGENT + "inbox/drain/", {}).json()["key"]
    api.post(AGENT + f"inbox/{event.pk}/settle/", {
        "key": key, "reply": "Here.", "effect": {"kind": "no_follow_up", "rationale": "x"}},
        format="json")
    outbox.drain(seconds=5)
    refused = lark.matching("POST", r"/open-apis/im/v1/messages$")
    assert refused and not app_messages(lark, MIRROR)
    event.refresh_from_db()
    assert (event.state, event.outcome) == ("acked", "reply_gone")
    assert ConnectorReply.objects.get(receipt=receipt).state == "gone"


# ------------------------------------------------------- mirror replies (steered turn)
@pytest.mark.django_db(transaction=True)
def test_a_steered_turns_answer_is_mirrored_once(api, pi_agent, model_server, lark, source):
    session_id = start(api).json()["session"]
    Session.objects.filter(pk=session_id).update(idle_timeout_s=1)
    row = connector(api, ingress_mode="live_steering", reply_mode="configured_mirror",
                    mirror_ref=MIRROR)
    model_server.script(Text("The release is cut."))
    lark.lark_message("om_steer", chat_id=CHAT, text="is the release cut?")
    receipt = ingress.accept(row, ingress.Event(
        dedupe_key="om_steer", kind="mention", text="is the release cut?", addressed=True,
        at=timezone.now(), place=CHAT))
    assert receipt.outcome == "delivered", receipt.reason

    outbox.drain(seconds=3)  # the turn has not run: nothing is sent yet
    assert app_messages(lark, MIRROR) == []
    assert run_host(session_id) == "slept"
    Effect.objects.filter(kind=replies.EFFECT_KIND).update(due_at=timezone.now())
    outbox.drain(seconds=5)
    posted = app_messages(lark, MIRROR)
    assert texts(posted) == ["The release is cut."]
    assert app_messages(lark, CHAT) == []
    assert lark.matching("GET", rf"/open-apis/im/v1/messages/{posted[0]['message_id']}")
    assert ConnectorReply.objects.get(receipt=receipt).state == "replied"

    outbox.enqueue(replies.EFFECT_KIND, f"turn:{receipt.pk}", {"receipt": receipt.pk,
                                                                "turn": True})
    outbox.drain(seconds=5)  # replayed: nothing more
    assert texts(app_messages(lark, MIRROR)) == ["The release is cut."]


# ----------------------------------------------------------------- channel selection
def _client(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/panel/sessions/goals/")
    return client, client.cookies["csrftoken"].value


def _header(html: str) -> str:
    begin = html.index('<p class="connections">')
    return html[begin:html.index("</p>", begin)]


def test_the_channel_is_chosen_explicitly_and_nothing_else_moves(api, client, pi_agent,
                                                                 lark, source):
    api.post("/api/v1/goals/ship/todos/", {"title": "write the release notes"})
    session = start(api).json()["session"]
    row = connector(api, ingress_mode="session_queue")
    before = (api.get("/api/v1/goals/ship/").json(),
              api.get("/api/v1/goals/ship/todos/").json(),
              api.get(AGENT).json())

    moved = api.post(f"/api/v1/connectors/{row.pk}/channel/", {"source_ref": OTHER})
    assert moved.status_code == 200, moved.content
    assert (moved.json()["source_ref"], moved.json()["state"]) == (OTHER, "listening")
    row.refresh_from_db()
    assert (row.source_ref, row.ingress_mode, row.capture_scope, row.reply_mode) == (
        OTHER, "session_queue", "mentions", "none")
    assert (api.get("/api/v1/goals/ship/").json(),
            api.get("/api/v1/goals/ship/todos/").json(), api.get(AGENT).json()) == before
    assert api.get(AGENT).json()["session"] == session and not Turn.objects.exists()

    # from now on the new chat reaches the agent and the old one no longer does
    assert mention(client, lark, "old chat", "om_old", chat=CHAT) is None
    receipt = mention(client, lark, "new chat", "om_new", chat=OTHER)
    assert receipt is not None and receipt.connector_id == row.pk
    assert receipt.outcome == "queued" and receipt.session_id == session

    # the same chat again changes nothing; without the slash it answers the same
    same = api.post(f"/api/v1/connectors/{row.pk}/channel", {"source_ref": OTHER})
    assert (same.status_code, same.json()["source_ref"]) == (200, OTHER)


def test_channel_refusals_name_source_ref(api, pi_agent, source):
    row = connector(api)
    url = f"/api/v1/connectors/{row.pk}/channel/"
    assert error(api.post(url, {"source_ref": STRANGER})) == (400, "invalid", ["source_ref"])
    assert error(api.post(url, {})) == (400, "invalid", ["source_ref"])
    assert api.post(url, {"source_ref": ["oc_x"]}, format="json").status_code == 400
    # another agent's active Lark Bot connection is bound to the chat
    add_agent(api, "reviewer")
    other = connector(api, agent="reviewer", source_ref=MIRROR)
    bound = api.post(url, {"source_ref": MIRROR})
    assert error(bound) == (409, "channel_bound", ["source_ref"])
    # once that one is disconnected, the chat is free
    api.delete(f"/api/v1/connectors/{other.pk}/")
    assert api.post(url, {"source_ref": MIRROR}).json()["source_ref"] == MIRROR
    web = api.post("/api/v1/connectors/", {"goal": "ship", "agent": "builder",
                                           "source_kind": "web_chat",
                                           "ingress_mode": "live_steering"}).json()
    assert error(api.post(f"/api/v1/connectors/{web['id']}/channel/",
                          {"source_ref": CHAT}))[:2] == (409, "no_channel")
    assert api.post("/api/v1/connectors/999999/channel/",
                    {"source_ref": CHAT}).status_code == 404
    row.refresh_from_db()
    assert row.source_ref == MIRROR


def test_the_goal_page_offers_the_configured_chats_and_changes_the_channel(
        operator, api, pi_agent, source):
    row = connector(api)
    add_agent(api, "reviewer")
    connector(api, agent="reviewer", source_ref=MIRROR)
    client, csrf = _client(operator)
    header = _header(client.get(PAGE).content.decode())
    assert f'action="{PAGE}connectors/{row.pk}/channel/"' in header
    assert f'data-action="channel" data-connector="{row.pk}"' in header
    for chat in (CHAT, MIRROR, OTHER):
        assert f'<option value="{chat}"' in header
    assert f'<option value="{CHAT}" selected>' in header

    page = client.post(f"{PAGE}connectors/{row.pk}/channel/",
                       {"csrfmiddlewaretoken": csrf, "source_ref": OTHER},
                       follow=True).content.decode()
    assert f"Lark Bot: channel {OTHER}." in page
    row.refresh_from_db()
    assert row.source_ref == OTHER
    assert f'<option value="{OTHER}" selected>' in page

    refused = client.post(f"{PAGE}connectors/{row.pk}/channel/",
                          {"csrfmiddlewaretoken": csrf, "source_ref": MIRROR},
                          follow=True).content.decode()
    assert "another active Lark Bot connection is bound to that chat" in refused
    unknown = client.post(f"{PAGE}connectors/{row.pk}/channel/",
                          {"csrfmiddlewaretoken": csrf, "source_ref": STRANGER},
                          follow=True).content.decode()
    assert "is not one of the Lark source" in unknown
    row.refresh_from_db()
    assert row.source_ref == OTHER
    assert client.get(f"{PAGE}connectors/{row.pk}/channel/").status_code == 405
    api.post("/api/v1/goals/", {"slug": "other", "title": "Another goal"})
    assert client.post(f"/panel/sessions/goals/other/connectors/{row.pk}/channel/",
                       {"csrfmiddlewaretoken": csrf, "source_ref": CHAT}).status_code == 404


def test_viewers_see_the_channel_but_cannot_change_it(viewer, api, pi_agent, source):
    row = connector(api)
    client, csrf = _client(viewer)
    header = _header(client.get(PAGE).content.decode())
    assert f"in {CHAT}" in header and "<form" not in header and "<select" not in header
    assert client.post(f"{PAGE}connectors/{row.pk}/channel/",
                       {"csrfmiddlewaretoken": csrf, "source_ref": OTHER}).status_code == 403
    row.refresh_from_db()
    assert row.source_ref == CHAT
