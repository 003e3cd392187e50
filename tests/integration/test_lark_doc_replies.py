"""Replies to a Lark document comment thread go into that comment as a reply (lark-oapi's
drive v1 file comment reply API, against the recording server), once per message id even
across a crash between send and commit: the API has no idempotency key, so each reply
carries a marker and a send first looks for it among the bot's replies."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from effects import outbox
from effects.models import Effect
from intake.models import Source, Thread
from intake.send import send
from intake.sources.base import Context, Message, SendResult
from intake.sources.lark import Lark, comment_marker
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.recording_server import RecordingServer
from tickets import reply_handlers

pytestmark = pytest.mark.django_db

TOKEN = "v-token"
BOT = "ou_bot"
REPLIES = r"/open-apis/drive/v1/files/{}/comments/{}/replies"


def reply(rid, user, at, text):
    return {"reply_id": rid, "user_id": user, "create_time": at, "text": text}


@pytest.fixture
def server():
    with RecordingServer() as srv:
        srv.state.lark_app_open_id = BOT
        srv.state.lark_comments["doxA"] = [
            {"comment_id": "c1", "quote": "the intro", "replies": [
                reply("r1", "ou_alice", 1_790_000_010, "please tighten this")]},
            {"comment_id": "c2", "is_whole": True, "replies": [
                reply("r2", "ou_bob", 1_790_000_020, "typo in line 3")]},
        ]
        # A spreadsheet that is not watched: its type is known only from its events.
        srv.state.lark_comments["shtS"] = [
            {"comment_id": "s1", "replies": [reply("sr1", "ou_carol", 1_790_000_030,
                                                   "B2 is wrong")]},
        ]
        yield srv


@pytest.fixture
def lark(server):
    # An app id of its own: lark-oapi caches tenant tokens per app id for the process.
    config = Lark.validate_config({
        "app_id": "cli_docreply", "bot_open_id": BOT, "domain": server.url,
        "doc_comments": True, "documents": ["docx:doxA"]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    source.save()
    return source


def plug(source) -> Lark:
    return Lark(source.config, source.secrets)


def bot_replies(server, token, comment) -> list[dict]:
    found = next(c for c in server.state.lark_comments[token] if c["comment_id"] == comment)
    return [r for r in found["replies"] if r["user_id"] == BOT]


def test_a_reply_lands_in_the_comment_thread_once_across_a_crash(lark, server, client):
    event = message_event(token=TOKEN, app_id="cli_docreply")
    event["header"]["event_type"] = "drive.notice.comment_add_v1"
    event["event"] = {"comment_id": "s1", "reply_id": "sr1", "is_mentioned": True,
                      "notice_meta": {"file_token": "shtS", "file_type": "sheet",
                                      "from_user_id": {"open_id": "ou_carol"},
                                      "from_user_type": "user", "notice_type": "add_comment"}}
    body, headers = sealed(event)
    answer = client.post("/hooks/lark/lk", data=body, content_type="application/json",
                         **headers)
    assert processed(answer)["trigger"]
    thread = Thread.objects.get(source=lark, key="doc:shtS:s1")
    assert thread.meta["file_type"] == "sheet"

    with transaction.atomic():
        effect = outbox.enqueue("relay", "r-doc", {"ticket": 0, "thread": thread.pk,
                                                   "text": "Fixed: B2 sums <A1:A9> now."})
    reply_handlers.relay(effect.pk, effect.payload)  # sent; then the process died
    outbox.drain(seconds=5)  # the replay finds its marker and posts nothing
    assert not Effect.objects.exists()

    path = REPLIES.format("shtS", "s1")
    posts = server.matching("POST", path)
    assert len(posts) == 1
    assert posts[0].query["file_type"] == ["sheet"]  # from the thread, not a default
    marker = comment_marker(f"effect-{effect.pk}")
    assert posts[0].body == {"content": {"elements": [{"type": "text_run", "text_run": {
        "text": f"Fixed: B2 sums &lt;A1:A9&gt; now.\n{marker}"}}]}}
    assert len(server.matching("GET", path)) == 2  # each attempt looked before posting
    assert [r["text"] for r in bot_replies(server, "shtS", "s1")] == [
        posts[0].body["content"]["elements"][0]["text_run"]["text"]]
    # The thread's context shows the bot's reply after the comment it answers.
    context = plug(lark).thread_context(thread.key, thread.meta, None)
    assert [c["author"] for c in context] == ["ou_carol", BOT]

    # Another message is another reply: the marker is per message, not per thread.
    assert send(lark, message_id="effect-other", thread=thread.key,
                       text="And B3.") == "sent"
    assert len(bot_replies(server, "shtS", "s1")) == 2


def test_a_crash_after_lark_stored_the_reply_but_before_the_answer_posts_nothing_again(
        lark, server):
    """The first attempt's request reaches Lark, which stores the reply and has not yet
    answered (the worker is about to die); the replay posts nothing."""
    message = Message("effect-7", "doc:doxA:c1", "On it", meta={"file_type": "docx"})
    path = REPLIES.format("doxA", "c1")
    held = server.hold("POST", path)
    first: list[SendResult] = []
    attempt = threading.Thread(target=lambda: first.append(plug(lark).send(message,
                                                                           Context())))
    attempt.start()
    try:
        assert held.arrived.wait(10)
        assert len(bot_replies(server, "doxA", "c1")) == 1  # stored, answer withheld
        assert plug(lark).send(message, Context()) == SendResult.SENT  # the replay
    finally:
        held.release()
        attempt.join(10)
    assert first == [SendResult.SENT]
    assert len(server.matching("POST", path)) == 1
    assert [r["text"] for r in bot_replies(server, "doxA", "c1")] == [
        f"On it\n{comment_marker('effect-7')}"]


def test_a_deleted_comment_or_document_is_gone_and_a_server_error_is_retried(lark, server):
    send = plug(lark).send
    comments = server.state.lark_comments["doxA"]
    comments[:] = [c for c in comments if c["comment_id"] != "c1"]  # deleted in Lark
    assert send(Message("m1", "doc:doxA:c1", "Done"), Context()) == SendResult.GONE
    assert send(Message("m2", "doc:doxGone:c9", "Done"), Context()) == SendResult.GONE
    # A whole-document comment takes no replies: Lark refuses, for good.
    assert send(Message("m3", "doc:doxA:c2", "Done"), Context()) == SendResult.GONE
    # Only that last one got as far as posting: the others failed looking for a marker.
    assert [r.path for r in server.matching("POST", r".*/replies")] == [
        REPLIES.format("doxA", "c2")]

    path = REPLIES.format("shtS", "s1")
    meta = {"file_type": "sheet"}
    server.state.fail_next.append(("POST", path, 502))
    assert send(Message("m4", "doc:shtS:s1", "Done", meta=meta), Context()) == "retry"
    server.state.fail_next.append(("GET", path, 429))  # rate limited while looking
    assert send(Message("m4", "doc:shtS:s1", "Done", meta=meta), Context()) == "retry"
    assert send(Message("m4", "doc:shtS:s1", "Done", meta=meta), Context()) == "sent"
    assert len(bot_replies(server, "shtS", "s1")) == 1


def test_a_long_reply_goes_out_in_parts_and_a_replay_posts_only_the_missing_ones(
        lark, server):
    text = "\n".join(f"step {i}: " + "x" * 90 for i in range(150))  # ~15,000 characters
    message = Message("effect-9", "doc:doxA:c1", text)  # its type from the watched list
    assert plug(lark).send(message, Context()) == SendResult.SENT
    path = REPLIES.format("doxA", "c1")
    posts = server.matching("POST", path)
    assert [p.query["file_type"] for p in posts] == [["docx"], ["docx"]]
    sent = [p.body["content"]["elements"][0]["text_run"]["text"] for p in posts]
    assert all(len(s) <= 10_000 for s in sent)
    assert [s.rsplit("\n", 1)[1] for s in sent] == [
        comment_marker("effect-9", 0, 2), comment_marker("effect-9", 1, 2)]
    assert "\n".join(s.rsplit("\n", 1)[0] for s in sent) == text

    # The second part never made it (the worker died after the first): the replay posts it
    # alone.
    found = next(c for c in server.state.lark_comments["doxA"] if c["comment_id"] == "c1")
    found["replies"].pop()
    assert plug(lark).send(message, Context()) == SendResult.SENT
    posts = server.matching("POST", path)
    assert len(posts) == 3 and posts[2].body == posts[1].body
    assert len(bot_replies(server, "doxA", "c1")) == 2
