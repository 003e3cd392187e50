"""An installation upgraded while a mailbox waits for a failed delivery's retry (intake's
own `attempts`/`retry_at`, before the retries moved onto the outbox) keeps that retry: the
migration gives each held mailbox its `intake.retry` effect, due when its retry was, with
its tries counted on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from effects import outbox
from effects.models import Effect
from intake import record
from intake.models import Delivery
from tests.support.old_schema import migrate_to_latest, old_schema_at

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("intake", "0007_bounded_inputs")]


@pytest.fixture
def old_schema():
    with old_schema_at(BEFORE) as apps:
        yield apps


def test_a_mailbox_waiting_for_its_retry_gets_its_outbox_retry(old_schema):
    model = lambda name: old_schema.get_model("intake", name)  # noqa: E731
    source = model("Source").objects.create(kind="github", slug="gh", name="GitHub",
                                            config={"repo": ["octo/app"]})
    now = timezone.now()
    long_mailbox = "gh:" + "x" * 380

    def delivery(delivery_id, mailbox, **fields):
        return model("Delivery").objects.create(
            source=source, delivery_id=delivery_id, event="issue_comment", mailbox=mailbox,
            body=b"{}", **fields).pk

    delivery("done", "gh:octo/app#1", processed_at=now, last_error="KeyError: 'sender'")
    held = delivery("held", "gh:octo/app#2", attempts=3, last_error="KeyError: 'sender'",
                    retry_at=now + timedelta(minutes=10))
    delivery("behind", "gh:octo/app#2")
    delivery("plain", "gh:octo/app#3")
    due = delivery("due", long_mailbox, attempts=1, last_error="RuntimeError: down",
                   retry_at=now - timedelta(seconds=5))

    migrate_to_latest()

    retries = {e.payload["delivery"]: e for e in Effect.objects.filter(kind=record.RETRY_EFFECT)}
    assert set(retries) == {held, due}  # only mailboxes a failed delivery holds back
    waiting = retries[held]
    assert (waiting.key, waiting.attempts, waiting.state) == ("gh:octo/app#2", 2, "pending")
    assert waiting.payload == {"source": source.pk, "mailbox": "gh:octo/app#2",
                               "delivery": held}
    assert timedelta(minutes=9) < waiting.due_at - timezone.now() <= timedelta(minutes=10)
    assert retries[due].key == record.retry_key(long_mailbox)
    assert len(retries[due].key) == outbox.MAX_KEY
    assert retries[due].due_at <= timezone.now()
    assert Delivery.objects.get(pk=held).last_error == "KeyError: 'sender'"  # still shown
