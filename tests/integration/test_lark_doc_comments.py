"""Lark document comments as an event source with a cursor per document: catch-up polling
through lark-oapi's drive v1 file comment API (against the recording server), deduplicated
against the webhook path, the cursor moving only with the triggers it stands for."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from intake import poll
from intake.models import Delivery, Source, Trigger
from intake.sources.lark import Lark
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.recording_server import RecordingServer

pytestmark = pytest.mark.django_db

TOKEN = "v-token"
BOT = "ou_bot"
T0 = 1_790_000_000  # the cursor both documents start from (seconds, as Lark's create_time)


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def reply(rid, user, at, text, mention=""):
    return {"reply_id": rid, "user_id": user, "create_time": at, "text": text,
            "mention": mention}


@pytest.fixture
def server():
    with RecordingServer() as srv:
        srv.state.lark_comments["doxA"] = [
            {"comment_id": "c0", "replies": [reply("r0", "ou_alice", T0 - 100, "old")]},
            # Three replies: more than the list shows inline, so the reply list is paged.
            {"comment_id": "c1", "quote": "the intro", "replies": [
                reply("r1a", "ou_alice", T0 + 10, "please review ", mention=BOT),
                reply("r1b", "ou_bob", T0 + 20, "and the summary"),
                reply("r1c", "ou_alice", T0 + 30, "thanks")]},
            {"comment_id": "c2", "is_whole": True, "replies": [
                reply("r2", "ou_carol", T0 + 20, "typo in line 3")]},  # same second as r1b
            {"comment_id": "c3", "replies": [reply("r3", BOT, T0 + 40, "On it")]},
        ]
        srv.state.lark_comments["doxB"] = [
            {"comment_id": "s1", "replies": [reply("sr1", "ou_dan", T0 + 5, "B2 is wrong")]},
        ]
        yield srv


@pytest.fixture
def lark(server):
    # An app id of its own: lark-oapi caches tenant tokens per app id for the process.
    config = Lark.validate_config({
        "app_id": "cli_docs", "bot_open_id": BOT, "domain": server.url, "doc_comments": True,
        "documents": ["docx:doxA", "sheet:doxB"]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config, health={"cursors": {
        "doc:docx:doxA": {"value": iso(T0), "seen": [], "at": iso(T0)},
        "doc:sheet:doxB": {"value": iso(T0), "seen": [], "at": iso(T0)}}})
    source.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    source.save()
    return source


def cursor(source, doc="doc:docx:doxA") -> dict:
    source.refresh_from_db()
    return source.health["cursors"][doc]


def hook(client, event_id, comment, reply_id="", notice="add_comment", user="ou_carol"):
    event = message_event(token=TOKEN, event_id=event_id, app_id="cli_docs")
    event["header"]["event_type"] = "drive.notice.comment_add_v1"
    event["event"] = {"comment_id": comment, "reply_id": reply_id, "is_mentioned": False,
                      "notice_meta": {"file_token": "doxA", "file_type": "docx",
                                      "from_user_id": {"open_id": user},
                                      "from_user_type": "user", "notice_type": notice}}
    body, headers = sealed(event)
    return client.post("/hooks/lark/lk", data=body, content_type="application/json", **headers)


def test_poll_makes_a_trigger_per_new_comment_and_reply_once(lark, server, client, operator):
    assert poll.poll(lark) == 6  # c1 ×3, c2, the bot's own c3 (seen, not a trigger), sr1
    triggers = {t.external_id: t for t in Trigger.objects.all()}
    assert set(triggers) == {"doc_comment:c1", "doc_comment:c1:r1b", "doc_comment:c1:r1c",
                             "doc_comment:c2", "doc_comment:s1"}
    first = triggers["doc_comment:c1"]
    assert first.scope == "doc_comment" and first.thread.key == "doc:doxA:c1"
    assert first.addressed and first.actor == "ou_alice"
    assert first.text == f"please review @{BOT}"
    assert not triggers["doc_comment:c1:r1b"].addressed
    assert triggers["doc_comment:s1"].meta["file_type"] == "sheet"
    assert Delivery.objects.get(delivery_id="poll:doc_comment:doxA:c3:r3").reason == "own_message"
    # The comment list was paged, and c1's replies read from its own reply list.
    listed = server.matching("GET", r"/open-apis/drive/v1/files/doxA/comments")
    assert [r.query.get("page_token") for r in listed] == [None, ["2"]]
    assert listed[0].query["file_type"] == ["docx"]
    assert server.matching("GET", r"/open-apis/drive/v1/files/doxA/comments/c1/replies")
    assert cursor(lark)["value"] == iso(T0 + 40) and cursor(lark)["seen"] == ["r3"]
    assert cursor(lark, "doc:sheet:doxB")["value"] == iso(T0 + 5)

    # Polling again finds nothing new and stores nothing.
    deliveries = Delivery.objects.count()
    assert poll.poll(lark) == 0
    assert Trigger.objects.count() == 5 and Delivery.objects.count() == deliveries

    # A reply in the very second of the cursor is still new; the cursor's freshness shows.
    server.state.lark_comments["doxA"][2]["replies"].append(
        reply("r2b", "ou_alice", T0 + 40, "fixed?"))
    assert poll.poll(lark) == 1
    assert Trigger.objects.filter(external_id="doc_comment:c2:r2b").exists()
    assert cursor(lark)["seen"] == ["r3", "r2b"]
    client.force_login(operator)
    page = client.get("/panel/sources/").content.decode()
    assert f"Cursor doc:docx:doxA: <span class=\"muted\">{iso(T0 + 40)[:19]}" in page


def test_webhook_copy_completed_by_polled_text(lark, server, client):
    """A webhook copy names the comment but not its text; on a watched document the polled
    copy, which has the text, makes the one trigger instead of being dropped as a
    duplicate of a textless one."""
    lark.health = {"cursors": {"doc:docx:doxA": {"value": iso(T0 + 15), "seen": []}}}
    lark.save()
    # A new comment's event may or may not name its first reply; either way one trigger.
    assert processed(hook(client, "ev-1", "c2", "r2")) == {
        "delivery": "ev-1", "trigger": None, "outcome": "ignored", "reason": "awaiting_text"}
    assert processed(hook(client, "ev-2", "c1", "r1b", notice="add_reply",
                          user="ou_bob"))["reason"] == "awaiting_text"
    assert not Trigger.objects.exists()
    assert poll.poll(lark) == 4  # r1b, r2, r1c, r3
    assert Trigger.objects.get(external_id="doc_comment:c2").text == "typo in line 3"
    assert Trigger.objects.get(external_id="doc_comment:c1:r1b").text == "and the summary"
    polled = Delivery.objects.get(delivery_id="poll:doc_comment:doxA:c2:r2")
    assert polled.trigger.external_id == "doc_comment:c2"
    assert set(Trigger.objects.values_list("external_id", flat=True)) == {
        "doc_comment:c2", "doc_comment:c1:r1b", "doc_comment:c1:r1c"}
    # And the other way round: polled first, the webhook's redelivery changes nothing.
    answer = hook(client, "ev-3", "c1", "r1c", notice="add_reply", user="ou_alice")
    assert processed(answer)["trigger"] is None
    assert Trigger.objects.count() == 3
    assert poll.poll(lark) == 0 and Trigger.objects.count() == 3  # no double processing

    # A polled comment whose text is empty (an image only) is not held for a text.
    server.state.lark_comments["doxA"][2]["replies"].append(
        reply("r2e", "ou_alice", T0 + 50, ""))
    assert poll.poll(lark) == 1
    assert Trigger.objects.get(external_id="doc_comment:c2:r2e").text == ""


def test_a_failure_mid_poll_leaves_that_documents_cursor_where_it_was(lark, server):
    before = cursor(lark)
    # The first page of comments is read, then c1's reply list fails.
    server.state.fail_next.append(
        ("GET", r"/open-apis/drive/v1/files/doxA/comments/c1/replies", 500))
    assert poll.poll(lark) == 1  # only doxB's comment
    assert cursor(lark) == before
    assert not Trigger.objects.filter(external_id__startswith="doc_comment:c").exists()
    assert cursor(lark, "doc:sheet:doxB")["value"] == iso(T0 + 5)  # its own cursor moved
    lark.refresh_from_db()
    assert lark.health["last_error"]["reason"] == "doc_poll_failed"
    assert poll.poll(lark) == 5  # the next poll takes it all
    assert Trigger.objects.count() == 5 and cursor(lark)["value"] == iso(T0 + 40)


def test_reading_a_document_never_moves_its_cursor(lark, server):
    poll.poll(lark)
    lark.refresh_from_db()
    health = lark.health
    server.state.lark_comments["doxA"][1]["replies"].append(
        reply("r1d", "ou_bob", T0 + 50, "one more thing"))
    plug = Lark(lark.config, lark.secrets)
    trigger = Trigger.objects.get(external_id="doc_comment:c1")
    context = plug.thread_context(trigger.thread.key, trigger.meta, None)
    assert [c["text"] for c in context] == [f"please review @{BOT}", "and the summary",
                                            "thanks", "one more thing"]
    assert context[0]["at"] == iso(T0 + 10)
    lark.refresh_from_db()
    assert lark.health == health
    assert poll.poll(lark) == 1  # the reply read above is still new to the poll
    assert Trigger.objects.filter(external_id="doc_comment:c1:r1d").exists()


def test_new_document_catches_up_bounded(lark, server):
    """A newly watched document's first poll takes the comments made before it was
    attached, back a bounded window (a week, at most the latest 50), not "from now"."""
    now = int(datetime.now(UTC).timestamp())
    doc = server.state.lark_comments["doxA"]
    doc[:] = [
        {"comment_id": "old", "replies": [reply("ro", "ou_alice", now - 8 * 86400, "stale")]},
        {"comment_id": "c1", "replies": [reply("r1", "ou_alice", now - 3600, "before",
                                               mention=BOT)]},
        {"comment_id": "c2", "replies": [reply("r2", "ou_bob", now - 60, "just before")]},
    ]
    lark.health = {}
    lark.save()
    assert poll.poll(lark) == 2  # r1, r2; doxB's only comment is older than the window
    assert set(Trigger.objects.values_list("external_id", flat=True)) == {
        "doc_comment:c1", "doc_comment:c2"}
    assert cursor(lark)["value"] == iso(now - 60)  # then the committed cursor
    assert poll.poll(lark) == 0
    doc.append({"comment_id": "c3", "replies": [reply("r3", "ou_bob", now + 1, "after")]})
    assert poll.poll(lark) == 1
    assert Trigger.objects.filter(external_id="doc_comment:c3").exists()

    # The bound on the number: of 60 recent comments only the latest 50 are taken.
    lark.health = {}
    lark.save()
    doc[:] = [{"comment_id": f"n{i:02}", "replies": [reply(f"rn{i:02}", "ou_alice",
                                                           now - 600 + i, f"n {i}")]}
              for i in range(60)]
    server.state.lark_page_size = 100
    assert poll.poll(lark) == 50
    assert not Trigger.objects.filter(external_id="doc_comment:n09").exists()
    assert Trigger.objects.filter(external_id="doc_comment:n10").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_a_textless_webhook_copy_wakes_the_poll_that_brings_its_text(server, tmp_path):
    """A webhook copy of a watched document's comment asks for a poll at once (a real
    Celery worker drains the webhook and runs that poll): the trigger with the text comes
    in seconds, not at the next periodic poll."""
    from django.test import Client

    from tests.support.workers import Worker, purge_queues, wait_for, worker_env

    purge_queues()
    config = Lark.validate_config({
        "app_id": "cli_docs", "bot_open_id": BOT, "domain": server.url, "doc_comments": True,
        "documents": ["docx:doxA"]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config, health={"cursors": {
        "doc:docx:doxA": {"value": iso(T0 + 15), "seen": [], "at": iso(T0)}}})
    source.secrets = {"verification_token": TOKEN, "app_secret": "sec"}
    source.save()
    worker = Worker("docpoll", worker_env(tmp_path), queues="default",
                    log=tmp_path / "worker.log")
    try:
        answer = hook(Client(), "ev-live", "c2", "r2")
        assert answer.status_code == 202
        trigger = wait_for(lambda: Trigger.objects.filter(external_id="doc_comment:c2").first(),
                           90, 0.2)
        assert trigger.text == "typo in line 3"
        webhook = Delivery.objects.get(delivery_id="ev-live")
        assert (webhook.outcome, webhook.reason) == ("ignored", "awaiting_text")
        assert Trigger.objects.filter(external_id="doc_comment:c2").count() == 1
        assert "Traceback" not in worker.log(), worker.log()  # before it is stopped
    finally:
        worker.stop()
