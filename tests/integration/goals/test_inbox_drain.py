"""Draining an agent's async inbox (issue 17, items 4–5): a real Lark mention through the
signed webhook and the intake drainer projects a content-free reply_due, comes first in
the drain, and is acknowledged only after its durable effect and its source-thread reply
read back from the recording Lark server through lark-oapi. Duplicates change nothing; a
reply Lark does not show is not acknowledged; a read-only connector records no_response;
a crash between the effect and the reply replays without a second effect."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from goals import ingress, replies
from goals.models import Connector, ConnectorReply, Decision, InboxEvent, Todo
from intake.models import Source
from intake.sources.lark import Lark
from policy import services as policy_services
from tests.integration.goals.conftest import add_agent
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.recording_server import RecordingServer

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]

TOKEN, KEY, BOT, ALICE = "v-token", "enc-key-123", "ou_bot", "ou_alice"
CHAT = "oc_team"
# lark-oapi caches a tenant token per app id for the process: an app id of this module's
# own keeps other modules' token requests theirs
APP = "cli_goals_inbox"
AGENT = "/api/v1/goals/ship/agents/builder/"


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        yield srv


def _source(domain: str) -> Source:
    config = Lark.validate_config({"app_id": APP, "bot_open_id": BOT, "domain": domain,
                                   "groups": [CHAT]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "encrypt_key": KEY, "app_secret": "sec"}
    source.save()
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": [ALICE], "rows": {"group_configured": {"addressed": True}}}}}, None)
    return source


def _connector(api, reply_mode="source_thread", **extra) -> Connector:
    response = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
        "source": "lk", "source_ref": CHAT, "capture_scope": "configured_chat_all",
        "ingress_mode": "async_inbox", "reply_mode": reply_mode, **extra})
    assert response.status_code == 201, response.content
    return Connector.objects.get(pk=response.json()["id"])


@pytest.fixture
def inbox(api, goal, lark):
    add_agent(api, "builder")
    _source(lark.url)
    return _connector(api)


def mention(client, lark, text: str, message_id: str) -> InboxEvent:
    """A person's mention of the bot in the chat: Lark has it, and its signed event
    arrives at the webhook and goes through the real intake drainer."""
    lark.lark_message(message_id, chat_id=CHAT, text=f"@_user_1 {text}")
    event = message_event(token=TOKEN, chat_id=CHAT, text=f"@_user_1 {text}", sender=ALICE,
                          mentions=[(BOT, "amux")], message_id=message_id, app_id=APP)
    body, headers = sealed(event, encrypt_key=KEY)
    processed(client.post("/hooks/lark/lk", data=body, content_type="application/json",
                          **headers))
    return InboxEvent.objects.get(receipt__dedupe_key=message_id)


def ordinary(connector: Connector, text: str, key: str) -> InboxEvent:
    """An unaddressed message of the configured chat, through the one ingress."""
    receipt = ingress.accept(connector, ingress.Event(
        dedupe_key=key, kind="message", text=text, actor=ALICE, addressed=False,
        at=timezone.now(), place=CHAT))
    assert receipt.outcome == "inboxed", receipt.reason
    return receipt.inboxed


def drain(api, **body):
    response = api.post(AGENT + "inbox/drain/", body)
    assert response.status_code == 200, response.content
    return response.json()


def settle(api, event_id, **body):
    return api.post(AGENT + f"inbox/{event_id}/settle/", body)


def urgency(api):
    return api.get(AGENT + "inbox/urgency/").json()


def replies_in(lark, parent: str) -> list[dict]:
    return [m for m in lark.state.lark_store.values()
            if m["sender"] == "app" and m["parent_id"] == parent]


def _private(payload, *secrets) -> list[str]:
    text = json.dumps(payload)
    return [s for s in secrets if s in text]


def test_a_mention_preempts_ordinary_messages_and_is_acked_after_effect_and_read_back(
        api, client, inbox, lark):
    ordinary(inbox, "lunch is at noon", "om_old_1")
    ordinary(inbox, "the build is green", "om_old_2")
    asked = mention(client, lark, "can you cut the release today?", "om_ask")

    due = urgency(api)
    assert (due["pending"], due["mentions"], due["reply_due"]) == (3, 1, True)
    assert not _private(due, "release", "lunch", ALICE, CHAT, "om_ask")

    first = drain(api)
    assert [e["id"] for e in first["events"]] == [asked.pk]  # the mention first
    event = first["events"][0]
    assert event["reply_due"] is True and "cut the release" in event["text"]
    assert event["state"] == "processing" and event["reply_mode"] == "source_thread"
    rest = drain(api, limit=5)
    assert [e["text"] for e in rest["events"]] == ["lunch is at noon", "the build is green"]
    assert drain(api, limit=5)["events"] == []  # every event is claimed

    settled = settle(api, asked.pk, key=first["key"], reply="On it: cutting it today.",
                     effect={"kind": "todo", "title": "Cut the release"})
    assert settled.status_code == 200, settled.content
    body = settled.json()
    todo = Todo.objects.get(title="Cut the release")
    assert (body["state"], body["effect"], body["reply"]) == (
        "replying", {"kind": "todo", "todo": todo.pk, "created": True}, "pending")
    # the durable effect stands; the reply is not sent yet, so no ACK and reply_due stays
    assert replies_in(lark, "om_ask") == []
    assert urgency(api)["reply_due"] is True

    outbox.drain(seconds=5)
    sent = replies_in(lark, "om_ask")
    assert [json.loads(m["content"])["text"] for m in sent] == ["On it: cutting it today."]
    read_back = lark.matching("GET", rf"/open-apis/im/v1/messages/{sent[0]['message_id']}")
    assert read_back, "the reply was read back from Lark"
    asked.refresh_from_db()
    assert (asked.state, asked.outcome) == ("acked", "replied")
    reply = ConnectorReply.objects.get(receipt=asked.receipt)
    assert (reply.state, reply.reply_ref) == ("replied", sent[0]["message_id"])
    after = urgency(api)
    assert (after["pending"], after["mentions"], after["reply_due"]) == (2, 0, False)


def test_duplicate_drain_settle_reply_and_ack_change_nothing(api, client, inbox, lark):
    asked = mention(client, lark, "please update the notes", "om_dup")
    first = drain(api, key="drainer-1")
    again = drain(api, key="drainer-1")
    assert again == first  # the same claim, unchanged (no second drain counted)
    assert InboxEvent.objects.get(pk=asked.pk).drains == 1

    effect = {"kind": "todo", "title": "Update the notes"}
    one = settle(api, asked.pk, key="drainer-1", effect=effect, reply="Will do.")
    two = settle(api, asked.pk, key="drainer-1", effect=effect, reply="Will do.")
    assert one.status_code == two.status_code == 200
    assert two.json() == one.json()
    assert Todo.objects.filter(title="Update the notes").count() == 1

    outbox.drain(seconds=5)
    outbox.enqueue(replies.EFFECT_KIND, f"reply:{asked.receipt_id}",
                   {"receipt": asked.receipt_id})  # the reply asked for again
    outbox.drain(seconds=5)
    replies.deliver(0, {"receipt": asked.receipt_id})  # and the ACK replayed
    assert len(replies_in(lark, "om_dup")) == 1
    assert len(lark.matching("POST", r"/open-apis/im/v1/messages/om_dup/reply")) == 1
    asked.refresh_from_db()
    acked_at = asked.acked_at
    assert asked.state == "acked" and acked_at is not None
    three = settle(api, asked.pk, effect={"kind": "no_follow_up", "rationale": "again"})
    assert three.status_code == 200 and three.json()["effect"]["kind"] == "todo"
    asked.refresh_from_db()
    assert asked.acked_at == acked_at and Todo.objects.count() == 1


def test_a_reply_lark_does_not_show_is_not_acked_and_stays_retried(api, client, inbox,
                                                                   lark):
    asked = mention(client, lark, "is the release out?", "om_lost")
    key = drain(api)["key"]
    lark.state.lark_lose_sends = True  # Lark answers the reply as sent, then loses it
    assert settle(api, asked.pk, key=key, reply="Yes, out since noon.",
                  effect={"kind": "no_follow_up", "rationale": "status question"}
                  ).status_code == 200
    outbox.drain(seconds=5)
    asked.refresh_from_db()
    assert asked.state == "replying" and asked.acked_at is None
    row = Effect.objects.get(kind=replies.EFFECT_KIND)
    assert row.attempts == 1 and "does not show it" in row.last_error
    assert urgency(api)["reply_due"] is True
    assert ConnectorReply.objects.get(receipt=asked.receipt).state == "pending"


def test_a_read_only_connector_records_an_explicit_no_response(api, client, goal, lark):
    add_agent(api, "builder")
    _source(lark.url)
    _connector(api, reply_mode="none")
    asked = mention(client, lark, "any news?", "om_ro")
    key = drain(api)["key"]
    refused = settle(api, asked.pk, key=key, reply="News!",
                     effect={"kind": "no_follow_up", "rationale": "nothing new"})
    assert refused.status_code == 400
    assert "reply" in refused.json()["error"]["fields"]
    done = settle(api, asked.pk, key=key,
                  effect={"kind": "no_follow_up", "rationale": "nothing new"})
    assert done.status_code == 200, done.content
    assert (done.json()["state"], done.json()["outcome"], done.json()["reply"]) == (
        "acked", "no_response", "none")
    assert not lark.matching("POST", r"/open-apis/im/v1/messages/.*")
    assert not Effect.objects.filter(kind=replies.EFFECT_KIND).exists()
    assert urgency(api)["reply_due"] is False


def test_a_crash_between_effect_and_reply_replays_without_a_second_effect(
        api, client, inbox, lark):
    asked = mention(client, lark, "open a todo for the changelog", "om_crash")
    key = drain(api)["key"]
    saved = outbox.handlers()
    calls = {"n": 0}

    @outbox.register(replies.EFFECT_KIND, replace=True)
    def crashing(effect_id, payload):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the drainer died before the reply")
        replies.deliver(effect_id, payload)

    try:
        effect = {"kind": "todo", "title": "Write the changelog"}
        assert settle(api, asked.pk, key=key, effect=effect, reply="Todo opened."
                      ).status_code == 200
        outbox.drain(seconds=5)
        asked.refresh_from_db()
        assert asked.state == "replying" and replies_in(lark, "om_crash") == []
        # the settle sent again (the drainer's own retry) records nothing more
        assert settle(api, asked.pk, key=key, effect=effect, reply="Todo opened."
                      ).status_code == 200
        Effect.objects.update(due_at=timezone.now())  # its retry is due now
        outbox.drain(seconds=5)
    finally:
        outbox._handlers.clear()
        outbox._handlers.update(saved)
    asked.refresh_from_db()
    assert (asked.state, asked.outcome) == ("acked", "replied")
    assert Todo.objects.filter(title="Write the changelog").count() == 1
    assert len(replies_in(lark, "om_crash")) == 1


def test_an_expired_claim_is_taken_by_the_next_drain(api, client, inbox, lark):
    asked = mention(client, lark, "who owns the release?", "om_claim")
    first = drain(api, key="crashed", lease_s=30)
    assert [e["id"] for e in first["events"]] == [asked.pk]
    assert drain(api, key="other")["events"] == []  # claimed
    refused = settle(api, asked.pk, key="other",
                     effect={"kind": "owner_gate", "question": "who owns it?"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == \
        "claimed_elsewhere"
    InboxEvent.objects.filter(pk=asked.pk).update(claimed_until=timezone.now())
    retaken = drain(api, key="other")
    assert [e["id"] for e in retaken["events"]] == [asked.pk]
    assert retaken["events"][0]["drains"] == 2
    done = settle(api, asked.pk, key="other",
                  effect={"kind": "owner_gate", "question": "who owns it?"})
    gate = Decision.objects.get()  # an owner gate waits for a person like any decision
    assert done.status_code == 200 and done.json()["effect"] == {"kind": "owner_gate",
                                                                 "decision": gate.pk}
    assert (gate.kind, gate.text, gate.state) == ("owner_gate", "who owns it?", "open")


@pytest.mark.parametrize(("body", "field"), [
    ({"effect": {"kind": "guess"}}, "effect.kind"),
    ({"effect": {"kind": "todo"}}, "effect.title"),
    ({"effect": {"kind": "todo", "todo": 999999}}, "effect.todo"),
    ({"effect": {"kind": "no_follow_up"}}, "effect.rationale"),
    ({"effect": "todo"}, "effect"),
    ({"effect": {"kind": "no_follow_up", "rationale": "x"}, "reply": 5}, "reply"),
])
def test_bad_settles_are_refused_naming_the_field(api, client, inbox, lark, body, field):
    asked = mention(client, lark, "hello?", "om_bad")
    key = drain(api)["key"]
    refused = settle(api, asked.pk, key=key, **body)
    assert refused.status_code == 400, refused.content
    assert field in refused.json()["error"]["fields"]
    asked.refresh_from_db()
    assert asked.state == "processing" and Todo.objects.count() == 0


def test_drain_and_settle_refuse_bad_input_and_undrained_events(api, client, inbox, lark):
    asked = mention(client, lark, "hello?", "om_undrained")
    for body, field in (({"limit": 0}, "limit"), ({"limit": "2"}, "limit"),
                        ({"lease_s": 5}, "lease_s")):
        refused = api.post(AGENT + "inbox/drain/", body)
        assert refused.status_code == 400 and field in refused.json()["error"]["fields"]
    early = settle(api, asked.pk, effect={"kind": "no_follow_up", "rationale": "x"})
    assert early.status_code == 409 and early.json()["error"]["code"] == "not_drained"
    assert settle(api, 999999, effect={"kind": "no_follow_up", "rationale": "x"}
                  ).status_code == 404


def test_viewers_cannot_drain(client, viewer, inbox, lark):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    mention(client, lark, "private question", "om_view")
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=viewer)[1]}")
    assert reader.post(AGENT + "inbox/drain/", {}).status_code == 403
    assert reader.get(AGENT + "inbox/urgency/").status_code == 200


def test_status_and_urgency_hold_no_bodies_authors_or_places(api, client, inbox, lark):
    asked = mention(client, lark, "the secret launch codename", "om_private")
    key = drain(api)["key"]
    settle(api, asked.pk, key=key, reply="Noted the codename.",
           effect={"kind": "todo", "title": "Track the launch"})
    outbox.drain(seconds=5)
    for path in (AGENT + "inbox/urgency/", AGENT, "/api/v1/goals/ship/",
                 f"/api/v1/ingress-receipts/?connector={inbox.pk}"):
        payload = api.get(path).json()
        assert not _private(payload, "codename", ALICE, CHAT), path


def test_a_message_that_disputes_a_done_todo_becomes_a_pending_decision(
        api, client, inbox, lark, operator):
    """Seed 003: a message that contradicts accepted state is recorded as a pending
    decision for a person, never a silent change of what the goal holds true."""
    done = Todo.objects.create(goal=inbox.goal, title="Ship the login fix", state="done",
                               evidence="PR #12 merged")
    disputed = mention(client, lark, "the login fix is not done, it still fails", "om_no")
    key = drain(api)["key"]
    reopened = settle(api, disputed.pk, key=key,
                      effect={"kind": "todo", "todo": done.pk, "state": "open"})
    assert reopened.status_code == 409, reopened.content
    error = reopened.json()["error"]
    assert error["code"] == "contradicts_accepted" and "effect.todo" in error["fields"]
    done.refresh_from_db()
    assert (done.state, done.evidence) == ("done", "PR #12 merged")

    recorded = settle(api, disputed.pk, key=key, reply="Noted: a person will decide.",
                      effect={"kind": "pending_decision", "todo": done.pk,
                              "question": "Reopen the login fix? Alice says it fails.",
                              "contradicts": "todo 'Ship the login fix' is done"})
    assert recorded.status_code == 200, recorded.content
    effect = recorded.json()["effect"]
    assert effect["kind"] == "pending_decision" and effect["todo"] == done.pk
    listed = api.get("/api/v1/goals/ship/decisions/?state=open").json()["results"]
    assert [(d["id"], d["kind"], d["todo"], d["inbox_event"], d["state"]) for d in listed] == [
        (effect["decision"], "pending_decision", done.pk, disputed.pk, "open")]
    assert listed[0]["contradicts"] == "todo 'Ship the login fix' is done"
    done.refresh_from_db()
    assert done.state == "done"  # the goal's truth stands until a person decides

    client.force_login(operator)
    page = client.get("/panel/sessions/goals/ship/").content.decode()
    assert f'data-decision="{effect["decision"]}" data-state="open"' in page
    assert "Reopen the login fix? Alice says it fails." in page

    resolved = api.post(f"/api/v1/goals/ship/decisions/{effect['decision']}/resolve/",
                        {"resolution": "Reopened: the fix missed SSO users."})
    assert resolved.status_code == 200, resolved.content
    assert (resolved.json()["state"], resolved.json()["resolved_by"]) == (
        "resolved", operator.username)
    again = api.post(f"/api/v1/goals/ship/decisions/{effect['decision']}/resolve/",
                     {"resolution": "twice"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "resolved"
    assert api.get("/api/v1/goals/ship/decisions/?state=open").json()["results"] == []
    assert api.get("/api/v1/goals/ship/decisions/?state=maybe").status_code == 400


def test_an_evidence_gap_and_a_panel_resolution(api, client, inbox, lark, operator):
    asked = mention(client, lark, "where are the benchmark numbers?", "om_gap")
    key = drain(api)["key"]
    gap = settle(api, asked.pk, key=key,
                 effect={"kind": "evidence_gap", "gap": "No benchmark run is recorded."})
    assert gap.status_code == 200, gap.content
    decision = gap.json()["effect"]["decision"]
    client.force_login(operator)
    empty = client.post(f"/panel/sessions/goals/ship/decisions/{decision}/resolve/",
                        {"resolution": "  "}, follow=True)
    assert "resolution must be a non-empty string" in empty.content.decode()
    client.post(f"/panel/sessions/goals/ship/decisions/{decision}/resolve/",
                {"resolution": "Run make bench before the review."})
    row = api.get(f"/api/v1/goals/ship/decisions/{decision}/").json()
    assert (row["kind"], row["text"], row["state"], row["resolution"]) == (
        "evidence_gap", "No benchmark run is recorded.", "resolved",
        "Run make bench before the review.")
    assert client.post("/panel/sessions/goals/ship/decisions/999999/resolve/",
                       {"resolution": "x"}).status_code == 404


@pytest.mark.parametrize(("effect", "field"), [
    ({"kind": "todo", "title": "x", "titel": "y"}, "effect.titel"),
    ({"kind": "no_follow_up", "rationale": "x", "reason": "y"}, "effect.reason"),
    ({"kind": "pending_decision"}, "effect.question"),
    ({"kind": "pending_decision", "question": "q", "todo": 999999}, "effect.todo"),
    ({"kind": "evidence_gap", "gap": "g", "todo": "3"}, "effect.todo"),
])
def test_settle_effects_refuse_unknown_members_and_bad_decisions(api, client, inbox, lark,
                                                                 effect, field):
    asked = mention(client, lark, "hello?", "om_members")
    refused = settle(api, asked.pk, key=drain(api)["key"], effect=effect)
    assert refused.status_code == 400, refused.content
    assert field in refused.json()["error"]["fields"]
    assert api.get("/api/v1/goals/ship/decisions/").json()["count"] == 0
