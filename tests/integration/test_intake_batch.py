"""Many mailboxes in one transaction (intake/batch.py, PostgreSQL and SQLite): a backlog
costs a few statements a delivery instead of about ten, and every outcome is the one that
processing a mailbox at a time gives — order kept, a failing delivery holding back only its
mailbox, a trigger seen before recorded once, a mailbox another drainer holds left to it."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection, connections, models, transaction
from django.db.models import Value
from django.test.utils import CaptureQueriesContext

from effects.models import Effect
from intake import checked_insert, process, record
from intake.models import Delivery, Source, Trigger
from intake.sources.github import GitHub
from tests.support.github_payloads import example
from tests.support.grown_model import grown
from tests.support.intake import translation_fails_for

pytestmark = pytest.mark.django_db(transaction=True)
# another drainer's advisory lock, another transaction's row lock: PostgreSQL's (SQLite's
# one writer at a time holds them all)
row_locks = pytest.mark.skipif(connection.vendor != "postgresql",
                               reason="SQLite has no row or advisory locks")

REPO = "Codertocat/Hello-World"


@pytest.fixture
def gh():
    source = Source(kind="github", slug="gh", name="GitHub",
                    config=GitHub.validate_config({"repo": [REPO]}))
    source.secrets = {"webhook_secret": "s", "token": "t"}
    source.save()
    return source


def store(source, issue: int, comment_id: int, delivery: str) -> None:
    payload = example("issue_comment", "created")
    payload["issue"]["number"], payload["comment"]["id"] = issue, comment_id
    assert process.delivery_stored(
        source_id=source.pk, delivery_id=delivery, event="issue_comment",
        mailbox=f"gh:{REPO}#{issue}", headers={}, body=json.dumps(payload).encode())


def triggers(issue: int) -> list[str]:
    return list(Trigger.objects.filter(thread__key=f"{REPO}#{issue}").order_by("pk")
                .values_list("external_id", flat=True))


def test_a_backlog_of_many_mailboxes_costs_a_few_statements_a_delivery(gh):
    for issue in range(40):
        store(gh, issue, 1000 + issue, f"d-{issue}")
    with CaptureQueriesContext(connection) as captured:
        assert process.process_pending() == 40
    # per delivery: its thread, its ticket's subscription, its trigger; the rest is shared
    assert len(captured.captured_queries) <= 3 * 40 + 10, len(captured.captured_queries)
    assert Trigger.objects.count() == 40
    stored = Delivery.objects.get(delivery_id="d-7")
    trigger = Trigger.objects.get(external_id="issue_comment:1007")
    assert stored.processed_at is not None and not stored.last_error
    assert (stored.outcome, stored.reason, stored.trigger_id) == (
        "ignored", trigger.reason, trigger.pk)
    assert trigger.reason and trigger.thread.key == f"{REPO}#7"


def test_order_within_each_mailbox_is_kept_across_a_batch(gh):
    for n in range(4):
        for issue in (1, 2, 3):
            store(gh, issue, issue * 100 + n, f"d-{issue}-{n}")
    assert process.process_pending() == 12
    for issue in (1, 2, 3):
        assert triggers(issue) == [f"issue_comment:{issue * 100 + n}" for n in range(4)]


def test_a_failing_delivery_holds_back_its_mailbox_and_no_other(gh, monkeypatch):
    translation_fails_for(monkeypatch, 201)
    store(gh, 1, 100, "one")
    store(gh, 2, 200, "two-first")
    store(gh, 2, 201, "two-fails")
    store(gh, 2, 202, "two-behind")
    store(gh, 3, 300, "three")
    assert process.process_pending() == 3
    failed = Delivery.objects.get(delivery_id="two-fails")
    assert failed.processed_at is None and failed.last_error == "KeyError: 'sender'"
    (retry,) = Effect.objects.filter(kind=record.RETRY_EFFECT)  # its mailbox's, no other's
    assert (retry.key, retry.attempts) == (failed.mailbox, 1)
    assert Delivery.objects.get(delivery_id="two-behind").processed_at is None
    assert triggers(1) == ["issue_comment:100"] and triggers(3) == ["issue_comment:300"]
    assert triggers(2) == ["issue_comment:200"]


def test_a_trigger_seen_before_undoes_the_batch_and_is_recorded_once(gh, caplog):
    """The same comment under two delivery ids (a redelivery GitHub gave a new id): the
    batch's optimistic insert meets the trigger's unique id, the batch is undone, and the
    one-mailbox path records the second as a duplicate; the other mailboxes are processed."""
    store(gh, 1, 100, "first")
    store(gh, 1, 100, "again")
    store(gh, 2, 200, "other")
    with caplog.at_level("INFO", logger="intake.batch"):
        assert process.process_pending() == 3
    assert "a batch of 2 mailboxes was undone (IntegrityError" in caplog.text
    assert triggers(1) == ["issue_comment:100"] and triggers(2) == ["issue_comment:200"]
    assert Delivery.objects.get(delivery_id="again").outcome == "duplicate"
    assert Delivery.objects.filter(processed_at=None).count() == 0


@row_locks
def test_a_mailbox_another_drainer_holds_is_left_to_it(gh):
    for issue in (1, 2, 3):
        store(gh, issue, issue * 100, f"d-{issue}")
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                           [record.MAILBOX_LOCKS, f"gh:{REPO}#2"])
            done, left = _batched(gh)
            assert done == 2 and left == [(gh.pk, f"gh:{REPO}#2")]
            cursor.execute("ROLLBACK")
    finally:
        other.close()
    assert triggers(2) == [] and process.process_pending() == 1 and len(triggers(2)) == 1


@row_locks
def test_a_batch_that_would_wait_for_a_row_lock_gives_way(gh):
    """A thread's row locked by another transaction (a turn ending, say): the batch does
    not wait past LOCK_WAIT, so it can never be the other side of a deadlock that PostgreSQL
    would settle by failing the other transaction; its mailboxes go one at a time."""
    from intake.models import Thread

    store(gh, 1, 100, "d-1")
    process.process_pending()
    store(gh, 1, 101, "d-1b")
    store(gh, 2, 200, "d-2")
    thread = Thread.objects.get(key=f"{REPO}#1")
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT id FROM intake_thread WHERE id = %s FOR UPDATE", [thread.pk])
            started = time.monotonic()
            done, left = _batched(gh)
            waited = time.monotonic() - started
            cursor.execute("ROLLBACK")
    finally:
        other.close()
    assert (done, sorted(left)) == (0, [(gh.pk, f"gh:{REPO}#1"), (gh.pk, f"gh:{REPO}#2")])
    assert waited < 1.0, waited  # below deadlock_timeout
    assert triggers(2) == [] and process.process_pending() == 2
    assert triggers(1) == ["issue_comment:100", "issue_comment:101"]


def _batched(source):
    from intake import batch

    rows = list(Delivery.objects.filter(processed_at=None).order_by("pk")
                .values_list("source_id", "mailbox"))
    assert not transaction.get_connection().in_atomic_block
    return batch.processed_together(rows, lambda _pk: source, version=None)


@pytest.fixture
def delivery_grown():
    """Delivery grown by two fields (one with a default only the database knows), in the
    model and its table, for one test."""
    def forget():
        checked_insert._statement.cache_clear()
        checked_insert._defaults.cache_clear()

    with grown(Delivery, {"flagged": models.BooleanField(default=False),
                          "lane": models.CharField(max_length=8, db_default=Value("slow"))},
               forget):
        yield


def test_a_field_added_to_delivery_leaves_the_batch_update_whole(gh, delivery_grown):
    """The batch's UPDATE is made from the model's fields (issue 31, item 5): with a field
    added, the batch still marks every row itself (no fallback to one mailbox at a time)
    and leaves the new field at its default."""
    for issue in (1, 2, 3):
        store(gh, issue, issue * 100, f"d-{issue}")
    assert _batched(gh) == (3, [])
    rows = Delivery.objects.order_by("pk").values_list("outcome", "trigger_id", "flagged",
                                                       "lane")
    assert [(o, bool(t), f, lane) for o, t, f, lane in rows] == [
        ("ignored", True, False, "slow")] * 3
