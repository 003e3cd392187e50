"""The acknowledgement order for Lark document comments (seed 003): capture → durable effect
→ optional receipt reply → the reply read back from Lark → only then ACK and the cursor
moves. Through lark-oapi against the recording server; crash points are made by stopping
between steps (a readback Lark fails once, a reply posted and the worker gone)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from effects import outbox
from effects.models import Effect
from intake import acks, poll, process
from intake.health_view import health
from intake.models import Delivery, EventAck, Source, Trigger
from intake.receive import queue
from intake.send import send
from intake.sources.lark import DocCursor, Lark, LarkApiError, comment_marker
from tests.support.recording_server import RecordingServer

pytestmark = pytest.mark.django_db

TOKEN = "v-token"
BOT = "ou_bot"
T0 = int(time.time()) - 3600  # an hour ago: acknowledged rows stay a week behind the cursor
RECEIPT = "Received: amux is on it."
REPLIES = r"/open-apis/drive/v1/files/doxA/comments/c1/replies"


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def reply(rid, user, at, text, mention=""):
    return {"reply_id": rid, "user_id": user, "create_time": at, "text": text,
            "mention": mention}


@pytest.fixture
def server():
    with RecordingServer() as srv:
        srv.state.lark_app_open_id = BOT
        srv.state.lark_comments["doxA"] = [
            {"comment_id": "c1", "replies": [
                reply("r1", "ou_alice", T0 + 10, "please review ", mention=BOT)]},
            {"comment_id": "c2", "replies": [reply("r2", "ou_bob", T0 + 20, "nice")]},
        ]
        yield srv


@pytest.fixture
def lark(server, settings, tmp_path):
    from policy import services as policy_services

    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"

    # An app id of its own: lark-oapi caches tenant tokens per app id for the process.
    config = Lark.validate_config({
        "app_id": "cli_acks", "bot_open_id": BOT, "domain": server.url, "doc_comments": True,
        "documents": ["docx:doxA"], "comment_receipt": RECEIPT})
    source = Source(kind="lark", slug="lk", name="Lark", config=config, health={"cursors": {
        "doc:docx:doxA": {"value": iso(T0), "seen": [], "at": iso(T0)}}})
    source.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    source.save()
    # A comment that mentions the bot is an explicit request.
    policy_services.save({"acceptance": "manual", "sources": {"lk": {
        "allowed": ["ou_alice", "ou_bob"], "rows": {"doc_comment": {"addressed": True}}}}},
        None)
    return source


def cursor(source) -> dict:
    source.refresh_from_db()
    return source.health["cursors"]["doc:docx:doxA"]


def state(item: str) -> str:
    return EventAck.objects.get(item=item).state


def bot_replies(server) -> list[str]:
    c1 = next(c for c in server.state.lark_comments["doxA"] if c["comment_id"] == "c1")
    return [r["text"] for r in c1["replies"] if r["user_id"] == BOT]


def retry_now() -> None:
    Effect.objects.update(due_at=Effect.objects.first().created_at)


def test_cursor_moves_only_after_verified_reply(lark, server):
    assert poll.poll(lark) == 2
    # Captured and the durable effect recorded (the admitted comment's trigger) — and yet
    # not acknowledged: its receipt reply is due. The unaddressed one needs no reply, but
    # the cursor cannot pass it without passing the first.
    assert Delivery.objects.get(delivery_id="poll:doc_comment:doxA:c1:r1").outcome == "admitted"
    assert Trigger.objects.filter(external_id="doc_comment:c1").exists()
    assert (state("r1"), state("r2")) == ("replying", "acked")
    assert EventAck.objects.get(item="r2").outcome not in ("replied", "")
    assert cursor(lark)["value"] == iso(T0)
    assert Effect.objects.filter(kind="intake.ack").count() == 1
    assert health(lark)["unacknowledged"] == {"doc:docx:doxA": {"replying": 1}}

    # The reply reaches Lark; the readback that follows fails once.
    held = server.hold("POST", REPLIES)

    def fail_the_readback():
        assert held.arrived.wait(10)
        server.state.fail_next.append(("GET", REPLIES, 500))
        held.release()

    helper = threading.Thread(target=fail_the_readback)
    helper.start()
    outbox.drain(seconds=5)
    helper.join(10)
    marker = comment_marker(f"ack-{EventAck.objects.get(item='r1').pk}")
    assert bot_replies(server) == [f"{RECEIPT}\n{marker}"]
    assert state("r1") == "replying" and cursor(lark)["value"] == iso(T0)  # not verified
    assert Effect.objects.get(kind="intake.ack").attempts == 1

    retry_now()
    outbox.drain(seconds=5)
    row = EventAck.objects.get(item="r1")
    assert (row.state, row.outcome) == ("acked", "replied") and row.reply_ref
    assert len(bot_replies(server)) == 1  # read back, not posted again
    assert cursor(lark)["value"] == iso(T0 + 20)  # past both, in order
    assert not Effect.objects.exists() and health(lark)["unacknowledged"] == {}

    # The bot's own receipt is the next reply on the document: seen, acknowledged with no
    # reply, and the cursor passes it too.
    assert poll.poll(lark) == 1
    own = EventAck.objects.exclude(item__in=["r1", "r2"]).get()
    assert (own.state, own.outcome) == ("acked", "own_message")
    assert cursor(lark)["seen"] == [own.item]


def test_crash_before_ack_replays_without_second_reply(lark, server):
    assert poll.poll(lark) == 2
    row = EventAck.objects.get(item="r1")
    # The worker posts the receipt and dies before reading it back or acknowledging.
    assert send(lark, message_id=f"ack-{row.pk}", thread="doc:doxA:c1", text=RECEIPT) == "sent"
    assert len(server.matching("POST", REPLIES)) == 1
    assert state("r1") == "replying" and cursor(lark)["value"] == iso(T0)

    # A poll meanwhile re-reads from the committed cursor: nothing captured twice.
    assert poll.poll(lark) == 1  # only the receipt itself, which is the bot's own reply
    assert Trigger.objects.filter(external_id__startswith="doc_comment:c1").count() == 1
    assert cursor(lark)["value"] == iso(T0)  # still held back by r1

    outbox.drain(seconds=5)  # the replay: the marker is found, nothing is posted again
    assert len(server.matching("POST", REPLIES)) == 1
    assert state("r1") == "acked"
    moved = cursor(lark)
    assert moved["value"] != iso(T0)

    # Duplicate drain, reply and ACK change nothing.
    effect = outbox.enqueue("intake.ack", f"ack:{row.pk}", {"ack": row.pk})
    outbox.drain(seconds=5)
    acks.reply_and_ack(effect.pk, {"ack": row.pk})
    assert poll.poll(lark) == 0
    assert len(server.matching("POST", REPLIES)) == 1
    assert cursor(lark)["value"] == moved["value"]
    assert EventAck.objects.filter(state="acked").count() == EventAck.objects.count() == 3


def test_a_capture_cut_short_holds_the_cursor_until_its_effect_is_recorded(lark, server):
    """Stopped after each step of a capture: the event's row written and nothing else,
    then its delivery stored and not yet processed. The cursor stays before it until its
    durable effect is recorded, and nothing is captured twice."""
    lark.config = {**lark.config, "comment_receipt": ""}  # no reply due: ACK after effect
    lark.save()
    plug = Lark(lark.config, lark.secrets)
    (env1, _), (env2, _) = plug.poll_document("docx", "doxA", DocCursor.load(cursor(lark)))
    assert acks.mark(lark, "doc:docx:doxA", env1)  # crash right after the first step
    assert not Delivery.objects.exists()
    assert poll.poll(lark) == 1  # r2 is new; r1's capture is completed, not repeated
    assert (state("r1"), state("r2")) == ("acked", "acked")
    assert cursor(lark)["value"] == iso(T0 + 20)

    # The second crash point: a new reply's delivery stored, its processing not yet run.
    server.state.lark_comments["doxA"][1]["replies"].append(
        reply("r3", "ou_bob", T0 + 30, "and this"))
    server.state.lark_comments["doxA"][0]["replies"].append(
        reply("r4", "ou_bob", T0 + 40, "later"))
    env3, env4 = [e for e, _ in plug.poll_document("docx", "doxA",
                                                   DocCursor.load(cursor(lark)))]
    assert acks.mark(lark, "doc:docx:doxA", env3)
    queue(lark, env3, {})  # stored for the drainer, which has not run
    assert poll.poll(lark) == 1  # r4
    assert (state("r3"), state("r4")) == ("captured", "acked")
    assert cursor(lark)["value"] == iso(T0 + 20)  # r4 is acknowledged but behind r3
    process.drain()  # the durable effect is recorded now
    assert poll.poll(lark) == 0
    assert state("r3") == "acked" and cursor(lark)["value"] == iso(T0 + 40)
    assert Trigger.objects.filter(external_id="doc_comment:c2:r3").count() == 1


def test_body_read_never_acks(lark, server):
    """The document body is authority material, read on its own path: reading it neither
    captures, acknowledges nor passes a comment, and the comments stay pending."""
    server.state.lark_documents["doxA"] = {"title": "Design", "revision_id": 7,
                                           "content": "The intro.\nThe summary.\n"}
    plug = Lark(lark.config, lark.secrets)
    body = plug.document_body("doxA")
    assert body == {"revision": 7, "title": "Design", "text": "The intro.\nThe summary.\n"}
    lark.refresh_from_db()
    assert lark.health["cursors"]["doc:docx:doxA"]["value"] == iso(T0)
    assert not EventAck.objects.exists() and not Delivery.objects.exists()

    assert poll.poll(lark) == 2  # the comments are still new to their own stream
    before = (cursor(lark), sorted(EventAck.objects.values_list("item", "state")))
    assert before[1] == [("r1", "replying"), ("r2", "acked")]
    assert plug.document_body("doxA")["revision"] == 7
    assert (cursor(lark), sorted(EventAck.objects.values_list("item", "state"))) == before
    assert not server.matching("POST", REPLIES)
    # A body Lark does not have is refused with Lark's code, touching nothing either.
    with pytest.raises(LarkApiError) as refused:
        plug.document_body("doxMissing")
    assert refused.value.code == 1770002
    assert cursor(lark) == before[0]
