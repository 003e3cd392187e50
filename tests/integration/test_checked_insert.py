"""intake.checked_insert stores a webhook's delivery as the ORM would (one statement made
from the models, each value prepared by its field; bound on the server on PostgreSQL), and
only while the source row is still the one the delivery was verified against. Run on
PostgreSQL and SQLite alike."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, models, transaction
from django.db.models import TextField, Value
from django.db.models.functions import Cast
from django.utils import timezone

from amux_common.integrity import violates
from intake import checked_insert
from intake.models import Delivery, Source
from intake.sources.github import GitHub
from tests.support.grown_model import grown

pytestmark = pytest.mark.django_db

BODY = bytes(range(256)) * 40  # every byte value, longer than a page


@pytest.fixture
def source():
    row = Source(kind="github", slug="gh", name="GitHub",
                 config=GitHub.validate_config({"repo": ["o/r"], "handle": "amux-bot"}))
    row.secrets = {"webhook_secret": "s", "token": "t"}
    row.save()
    return row


def seen_of(source: Source) -> checked_insert.SourceSeen:
    stored = (Source.objects.annotate(text=Cast("secrets", TextField()))
              .values_list("text", flat=True).get(pk=source.pk))
    return checked_insert.SourceSeen(source.pk, source.kind, source.slug, source.config,
                                     stored)


def insert(source: Source, delivery_id: str, seen=None) -> int | None:
    return checked_insert.inserted(
        source_id=source.pk, delivery_id=delivery_id, event="issue_comment",
        mailbox="gh:o/r#1", headers={"x-github-event": "issue_comment", "user-agent": "hé"},
        body=BODY, seen=seen or seen_of(source))


def test_the_row_is_what_the_orm_stores(source):
    pk = insert(source, "d-1")
    by_orm = Delivery.objects.create(
        source=source, delivery_id="d-2", event="issue_comment", mailbox="gh:o/r#1",
        headers={"x-github-event": "issue_comment", "user-agent": "hé"}, body=BODY)
    fields = [f.attname for f in Delivery._meta.concrete_fields
              if f.attname not in ("id", "delivery_id", "received_at")]
    stored, expected = (Delivery.objects.values(*fields, "received_at").get(pk=p)
                        for p in (pk, by_orm.pk))
    assert bytes(stored.pop("body")) == bytes(expected.pop("body")) == BODY
    assert stored.pop("received_at") <= expected.pop("received_at")
    assert stored == expected
    assert stored["processed_at"] is None and stored["last_error"] == ""


def test_a_changed_source_stores_nothing(source):
    seen = seen_of(source)
    source.config = dict(source.config, receive_all=True)
    source.save()
    assert insert(source, "d-1", seen) is None
    assert insert(source, "d-1") is not None  # against the row as it is now
    Source.objects.filter(pk=source.pk).update(enabled=False)
    assert insert(source, "d-2", seen_of(source)) is None
    assert list(Delivery.objects.values_list("delivery_id", flat=True)) == ["d-1"]


@pytest.mark.django_db(transaction=True)
def test_a_changed_or_disabled_source_stores_nothing_in_autocommit(source):
    """The webhook's own way: the statement is its own transaction."""
    seen = seen_of(source)
    source.secrets = {"webhook_secret": "rotated", "token": "t"}
    source.save()
    assert insert(source, "d-1", seen) is None
    assert insert(source, "d-1") is not None
    Source.objects.filter(pk=source.pk).update(enabled=False)
    assert insert(source, "d-2", seen_of(source)) is None
    assert list(Delivery.objects.values_list("delivery_id", flat=True)) == ["d-1"]


def test_a_changed_source_leaves_the_callers_transaction_usable(source):
    seen = seen_of(source)
    Source.objects.filter(pk=source.pk).update(slug="gh-renamed")
    with transaction.atomic():
        assert insert(source, "d-1", seen) is None
        source.refresh_from_db()
        assert insert(source, "d-2") is not None  # the same transaction goes on
    assert list(Delivery.objects.values_list("delivery_id", flat=True)) == ["d-2"]


def test_the_source_stored_is_the_row_seen(source):
    with pytest.raises(ValueError, match="not the row seen"):
        checked_insert.inserted(source_id=source.pk + 1, delivery_id="d", event="e",
                                mailbox="m", headers={}, body=b"", seen=seen_of(source))


def test_a_delivery_id_stored_before_is_the_unique_constraint(source):
    insert(source, "d-1")
    with pytest.raises(IntegrityError) as caught:
        insert(source, "d-1")
    assert violates(caught.value, "delivery_unique_id")


@pytest.fixture
def added_fields():
    """Delivery grown by five fields (with a constant, a callable and a JSON default, and two
    with only a database default), in the model and in its table, for one test; the model
    and table as they were after."""
    def forget():
        checked_insert._statement.cache_clear()
        checked_insert._defaults.cache_clear()

    with grown(Delivery, {"flagged": models.BooleanField(default=False),
                          "noted_at": models.DateTimeField(default=timezone.now),
                          "labels": models.JSONField(default=list),
                          "tally": models.IntegerField(db_default=7),
                          "lane": models.CharField(max_length=8, db_default=Value("slow"))},
               forget) as fields:
        yield fields


@pytest.mark.django_db(transaction=True)
def test_a_field_added_to_delivery_is_stored_at_its_default(source, added_fields):
    """What broke the first webhook on PostgreSQL only (issue 31): a default that was no SQL
    constant (False) could not be written into the statement's text."""
    before = timezone.now()
    pk = insert(source, "d-1")
    row = Delivery.objects.values("flagged", "noted_at", "labels", "body").get(pk=pk)
    assert (row["flagged"], row["labels"], bytes(row["body"])) == (False, [], BODY)
    assert row["noted_at"] >= before  # a callable default is called for each delivery
    second = Delivery.objects.values_list("noted_at", flat=True).get(pk=insert(source, "d-2"))
    assert second >= row["noted_at"]


@pytest.mark.django_db(transaction=True)
def test_a_column_with_only_a_database_default_is_left_to_the_database(source, added_fields):
    pk = insert(source, "d-1")
    by_orm = Delivery.objects.create(
        source=source, delivery_id="d-2", event="issue_comment", mailbox="gh:o/r#1",
        headers={}, body=b"")
    rows = Delivery.objects.filter(pk__in=[pk, by_orm.pk]).values_list("tally", "lane")
    assert list(rows) == [(7, "slow"), (7, "slow")]
