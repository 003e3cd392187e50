"""Integrity errors are told apart by the constraint they broke (amux_common.integrity),
the same on SQLite and PostgreSQL."""

import pytest
from django.db import IntegrityError, transaction

from amux_common.integrity import violates
from tickets.actions import commands
from tickets.models import Delivery, Source, Subscription, Thread, Ticket

pytestmark = pytest.mark.django_db


def broken(create) -> IntegrityError:
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        create()
    return caught.value


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
