"""A `lark_document_comment` connector's comment cursor advances only from the inbox
acknowledgement (issue 17): attaching a document catches up the comments made before it;
a comment is captured and deduplicated, drained, settled with a durable effect, answered
in its comment thread and read back from the recording Lark server through lark-oapi, and
only then acknowledged — and only then does the document's cursor pass it. A crash before
the ACK replays the comment; a duplicate settle or ACK changes nothing; webhook and polled
copies of one comment make one inbox event, with the text; reading the document's body
acknowledges nothing."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from goals.models import Connector, InboxEvent, Todo
from intake import poll
from intake.models import EventAck, Source, Trigger
from intake.sources.lark import Lark, comment_marker
from policy import services as policy_services
from tests.integration.goals.conftest import add_agent
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.recording_server import RecordingServer

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]

TOKEN, BOT, ALICE, BOB = "v-token", "ou_bot", "ou_alice", "ou_bob"
# lark-oapi caches a tenant token per app id for the process: this module's own app id
APP = "cli_goals_doc_comments"
AGENT = "/api/v1/goals/ship/agents/builder/"
CURSOR = "doc:docx:doxA"
REPLIES = r"/open-apis/drive/v1/files/doxA/comments/c1/replies"
T1 = int(time.time()) - 3600  # the comment was made an hour before the document was attached


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def reply(rid, user, at, text, mention=""):
    return {"reply_id": rid, "user_id": user, "create_time": at, "text": text,
            "mention": mention}


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        srv.state.lark_app_open_id = BOT
        srv.state.lark_comments["doxA"] = [{"comment_id": "c1", "replies": [
            reply("r1", ALICE, T1, "please tighten the summary ", mention=BOT)]}]
        yield srv


@pytest.fixture
def source(lark):
    # no document watched yet, doc comments off: the connector attaches the document
    config = Lark.validate_config({"app_id": APP, "bot_open_id": BOT, "domain": lark.url})
    row = Source(kind="lark", slug="lk", name="Lark", config=config)
    row.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    row.save()
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": [ALICE, BOB], "rows": {"doc_comment": {"addressed": True}}}}},
        None)
    return row


def _attach(api, reply_mode="source_comment", agent="builder") -> Connector:
    response = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": agent, "source_kind": "lark_document_comment",
        "source": "lk", "source_ref": "doxA", "ingress_mode": "async_inbox",
        "reply_mode": reply_mode})
    assert response.status_code == 201, response.content
    return Connector.objects.get(pk=response.json()["id"])


@pytest.fixture
def doc_inbox(api, goal, source):
    add_agent(api, "builder")
    return _attach(api)


def cursor(source) -> dict:
    source.refresh_from_db()
    return source.health["cursors"][CURSOR]


def polled(source) -> int:
    """The source's document poll, as the periodic task runs it (the row read fresh)."""
    source.refresh_from_db()
    return poll.poll(source)


def ack_of(item: str) -> EventAck:
    return EventAck.objects.get(item=item)


def drain(api, **body) -> dict:
    response = api.post(AGENT + "inbox/drain/", body)
    assert response.status_code == 200, response.content
    return response.json()


def settle(api, event_id, **body):
    return api.post(AGENT + f"inbox/{event_id}/settle/", body)


def bot_replies(lark) -> list[str]:
    c1 = next(c for c in lark.state.lark_comments["doxA"] if c["comment_id"] == "c1")
    return [r["text"] for r in c1["replies"] if r["user_id"] == BOT]


def hook(client, event_id, comment, reply_id, user=ALICE):
    event = message_event(token=TOKEN, event_id=event_id, app_id=APP)
    event["header"]["event_type"] = "drive.notice.comment_add_v1"
    event["event"] = {"comment_id": comment, "reply_id": reply_id, "is_mentioned": True,
                      "notice_meta": {"file_token": "doxA", "file_type": "docx",
                                      "from_user_id": {"open_id": user},
                                      "from_user_type": "user", "notice_type": "add_comment"}}
    body, headers = sealed(event)
    return client.post("/hooks/lark/lk", data=body, content_type="application/json", **headers)


def test_attaching_a_document_catches_up_a_comment_made_before_it(api, doc_inbox, source):
    source.refresh_from_db()
    assert source.config["doc_comments"] and source.config["documents"] == ["docx:doxA"]
    assert doc_inbox.source_ref == "doxA"
    assert polled(source) == 1  # the bounded catch-up of the newly watched document
    event = InboxEvent.objects.get()
    assert (event.kind, event.thread, event.state) == ("mention", "doc:doxA:c1", "pending")
    assert "please tighten the summary" in event.text and event.actor == ALICE
    assert ack_of("r1").state == "held"  # captured, its effect pending in the inbox
    assert "r1" not in cursor(source)["seen"]  # the cursor stands before it
    due = api.get(AGENT + "inbox/urgency/").json()
    assert (due["pending"], due["mentions"], due["reply_due"]) == (1, 1, True)
    # attaching again (another connector on the same document) lists it once
    add_agent(api, "reviewer")
    _attach(api, agent="reviewer")
    source.refresh_from_db()
    assert source.config["documents"] == ["docx:doxA"]


def test_the_cursor_passes_a_comment_only_after_its_reply_is_read_back(
        api, doc_inbox, source, lark, django_capture_on_commit_callbacks):
    lark.state.lark_comments["doxA"].append({"comment_id": "c2", "replies": [
        reply("r2", BOB, T1 + 10, "looks fine to me")]})  # unaddressed: not for the inbox
    assert polled(source) == 2
    start = cursor(source)
    assert (ack_of("r1").state, ack_of("r2").state) == ("held", "acked")
    assert InboxEvent.objects.count() == 1  # the gate ignored the unaddressed one

    drained = drain(api)
    event_id = drained["events"][0]["id"]
    assert drained["events"][0]["reply_mode"] == "source_comment"
    assert cursor(source) == start  # draining is processing, not an ACK
    answer = settle(api, event_id, key=drained["key"], reply="Tightened it.",
                    effect={"kind": "todo", "title": "Tighten the summary"})
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "replying"
    assert Todo.objects.filter(title="Tighten the summary").exists()  # the durable effect
    assert ack_of("r1").state == "held" and cursor(source) == start
    assert polled(source) == 0 and cursor(source) == start

    # The reply reaches Lark; the readback that follows fails once: no ACK, no cursor.
    held = lark.hold("POST", REPLIES)

    def fail_the_readback():
        assert held.arrived.wait(10)
        lark.state.fail_next.append(("GET", REPLIES, 500))
        held.release()

    helper = threading.Thread(target=fail_the_readback)
    helper.start()
    outbox.drain(seconds=5)
    helper.join(10)
    assert len(bot_replies(lark)) == 1
    assert InboxEvent.objects.get(pk=event_id).state == "replying"
    assert ack_of("r1").state == "held" and cursor(source) == start

    Effect.objects.update(due_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        outbox.drain(seconds=5)
    event = InboxEvent.objects.get(pk=event_id)
    assert (event.state, event.outcome) == ("acked", "replied")
    row = ack_of("r1")
    assert (row.state, row.outcome) == ("acked", "replied") and row.reply_ref
    assert cursor(source)["value"] == iso(T1 + 10)  # past both comments, in order
    assert len(bot_replies(lark)) == 1 and comment_marker(
        f"goals-reply-{event.receipt.reply.pk}") in bot_replies(lark)[0]
    # the bot's own reply is the next one on the document: seen, never an inbox event
    assert polled(source) == 1 and InboxEvent.objects.count() == 1


def test_a_settle_without_reply_acks_no_response_and_a_duplicate_changes_nothing(
        api, goal, source, django_capture_on_commit_callbacks):
    add_agent(api, "builder")
    _attach(api, reply_mode="none")  # read-only: the settle itself is the ACK
    polled(source)
    start = cursor(source)
    drained = drain(api)
    event_id = drained["events"][0]["id"]
    effect = {"kind": "no_follow_up", "rationale": "already tight"}
    with django_capture_on_commit_callbacks(execute=True):
        first = settle(api, event_id, key=drained["key"], effect=effect)
    assert first.status_code == 200 and first.json()["outcome"] == "no_response"
    assert (ack_of("r1").state, ack_of("r1").outcome) == ("acked", "no_response")
    moved = cursor(source)
    assert moved != start and (moved["value"], moved["seen"]) == (iso(T1), ["r1"])

    with django_capture_on_commit_callbacks(execute=True):
        again = settle(api, event_id, key=drained["key"], effect=effect)
    assert again.json() == first.json()
    assert polled(source) == 0
    assert cursor(source) == moved and EventAck.objects.count() == 1
    assert InboxEvent.objects.count() == 1 and Trigger.objects.count() == 1


def test_a_crash_before_the_ack_replays_the_comment_and_the_cursor_waits(
        api, doc_inbox, source):
    polled(source)
    start = cursor(source)
    first = drain(api, lease_s=30)  # the drainer dies here: no settle, no ACK
    event_id = first["events"][0]["id"]
    assert polled(source) == 0  # re-read from the committed cursor, not captured twice
    assert cursor(source) == start
    assert EventAck.objects.count() == InboxEvent.objects.count() == 1
    InboxEvent.objects.update(claimed_until=timezone.now() - timedelta(seconds=1))
    replayed = drain(api)
    assert [e["id"] for e in replayed["events"]] == [event_id]
    assert replayed["events"][0]["drains"] == 2

    # Settled; the process dies after the ACK committed, before the cursor moved (its
    # after-commit step never runs here): the next poll moves it, capturing nothing.
    answer = settle(api, event_id, key=replayed["key"],
                    effect={"kind": "owner_gate", "question": "Is the summary final?"})
    assert answer.json()["state"] == "acked"
    assert ack_of("r1").state == "acked" and cursor(source) == start
    assert polled(source) == 0
    assert (cursor(source)["value"], cursor(source)["seen"]) == (iso(T1), ["r1"])
    assert Trigger.objects.count() == InboxEvent.objects.count() == 1


def test_webhook_and_polled_copies_of_one_comment_make_one_inbox_event_with_text(
        api, client, doc_inbox, source):
    # the webhook copy has no text: it waits for the polled copy of the watched document
    assert processed(hook(client, "ev-1", "c1", "r1"))["reason"] == "awaiting_text"
    assert not InboxEvent.objects.exists()
    assert polled(source) == 1
    event = InboxEvent.objects.get()
    assert "please tighten the summary" in event.text
    # the webhook's redelivery, and another copy of it, change nothing
    assert processed(hook(client, "ev-2", "c1", "r1"))["trigger"] is None
    assert polled(source) == 0
    assert InboxEvent.objects.count() == Trigger.objects.count() == 1
    assert ack_of("r1").state == "held"


def test_reading_the_document_body_never_acknowledges_its_comments(api, doc_inbox, source,
                                                                    lark):
    polled(source)
    before = (cursor(source), ack_of("r1").state)
    lark.state.lark_documents["doxA"] = {"title": "Design", "revision_id": 3,
                                         "content": "The summary.\n"}
    body = Lark(source.config, source.secrets).document_body("doxA")
    registered = api.post("/api/v1/goals/ship/materials/",
                          {"key": "design", "body": body["text"]})
    assert registered.status_code in (200, 201), registered.content
    assert (cursor(source), ack_of("r1").state) == before == (before[0], "held")
    assert InboxEvent.objects.get().state == "pending"
    assert not lark.matching("POST", REPLIES)
