"""amux_common.integrity.violates tells which named constraint a real IntegrityError broke,
on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from amux_common.integrity import violates
from effects.models import ClaimTurn, Effect
from intake.models import Delivery, Source, Thread
from prompts_app.models import ONE_PER_REVISION, PromptVersion
from tickets.actions import commands
from tickets.models import Subscription, Ticket

pytestmark = pytest.mark.django_db


def broken(write) -> IntegrityError:
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        write()
    return caught.value


def test_a_unique_constraint_is_told_by_its_name():
    PromptVersion(revision=1).save(force_insert=True)
    exc = broken(lambda: PromptVersion(revision=1).save(force_insert=True))
    assert violates(exc, ONE_PER_REVISION)
    assert not violates(exc, "effect_one_pending")
    assert not violates(exc, "no_such_constraint")


def test_a_unique_constraint_over_several_columns_is_told_by_its_name():
    now = timezone.now()
    Effect.objects.create(kind="deliver", key="input-1", due_at=now)
    Effect.objects.create(kind="deliver", key="input-1", due_at=now, state="dead")  # allowed
    exc = broken(lambda: Effect.objects.create(kind="deliver", key="input-1", due_at=now))
    assert violates(exc, "effect_one_pending")
    assert not violates(exc, ONE_PER_REVISION)


def test_a_check_constraint_is_told_by_its_name():
    exc = broken(lambda: ClaimTurn.objects.create(pk=2))
    assert violates(exc, "claim_turn_one_row")
    assert not violates(exc, "effect_one_pending")


def test_a_foreign_key_or_not_null_error_is_no_named_constraint_s():
    exc = broken(lambda: Effect.objects.create(kind="deliver", key="k", due_at=None))
    assert not violates(exc, "effect_one_pending")


def test_a_named_unique_constraint_is_recognised_by_its_name():
    source = Source.objects.create(kind="github", slug="gh", name="GitHub")
    row = dict(source=source, delivery_id="d-1", event="issues", mailbox="gh:x", headers={},
               body=b"{}")
    Delivery.objects.create(**row)
    exc = broken(lambda: Delivery.objects.create(**row))
    assert violates(exc, "delivery_unique_id")
    assert not violates(exc, "thread_unique_key")


def test_a_unique_field_is_recognised_by_its_default_name():
    source = Source.objects.create(kind="github", slug="gh", name="GitHub")
    thread = Thread.objects.create(source=source, key="o/r#1")
    ticket = Ticket.objects.create(short_name="t1", title="Fix", thread=thread)
    Subscription.objects.create(ticket=ticket, thread=thread)
    exc = broken(lambda: Subscription.objects.create(ticket=ticket, thread=thread))
    assert violates(exc, commands.SUBSCRIPTION_THREAD)
    assert not violates(exc, "delivery_unique_id")
    other = broken(lambda: Ticket.objects.create(short_name="t1", title="Again", thread=thread))
    assert not violates(other, commands.SUBSCRIPTION_THREAD)
    assert violates(other, "tickets_ticket_short_name_key")
