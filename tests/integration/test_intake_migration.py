"""An installation upgraded across intake's move from `tickets` to `intake` keeps its rows:
written under the old schema (tickets' migrations up to 0010, the models `tickets.Source`,
`tickets.Trigger`, … in tables `tickets_*`), then migrated forward, they are the same rows
of `intake.Source`, `intake.Trigger`, … (tables `intake_*`), the tickets that point at
them still do, and the dead `Correlation` table is gone."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction

from intake.models import Channel, Delivery, OutgoingMessage, Source, Thread, Trigger
from tests.support.old_schema import migrate_to_latest, old_schema_at
from tickets.models import Eval, Input, Mandate, Subscription, Ticket

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("tickets", "0010_guards"), ("intake", None)]
MOVED = ("source", "delivery", "thread", "trigger", "channel", "outgoingmessage")


@pytest.fixture
def old_schema():
    with old_schema_at(BEFORE) as apps:
        yield apps


def _old_rows(apps) -> dict:
    model = lambda name: apps.get_model("tickets", name)  # noqa: E731
    source = model("Source").objects.create(kind="github", slug="gh", name="GitHub",
                                            config={"repo": ["octo/app"]},
                                            health={"rejected": {"bad_signature": 2}})
    thread = model("Thread").objects.create(source=source, key="octo/app#7", title="Fix it",
                                            meta={"issue_state": "open"})
    trigger = model("Trigger").objects.create(
        source=source, thread=thread, external_id="comment:1", scope="issue_comment",
        actor="alice", addressed=True, text="@amux fix it", decision="explicit",
        strength="explicit", rule="gh.issue_comment.addressed", disposition="admitted")
    delivery = model("Delivery").objects.create(
        source=source, delivery_id="d-1", event="issue_comment", mailbox="gh:octo/app#7",
        body=b'{"action":"created"}', outcome="admitted", trigger=trigger)
    channel = model("Channel").objects.create(source=source, address="oc_team", kind="chat")
    outgoing = model("OutgoingMessage").objects.create(source=source, thread_key="t1",
                                                       message_id="m1", text="On it")
    ticket = model("Ticket").objects.create(short_name="fix-it", title="Fix it",
                                            thread=thread, channel=channel)
    model("Mandate").objects.create(ticket=ticket, trigger=trigger, policy_version="v1",
                                    scope="issue_comment", strength="explicit",
                                    requester="alice")
    model("Subscription").objects.create(ticket=ticket, thread=thread)
    model("Input").objects.create(ticket=ticket, text="@amux fix it", trigger=trigger)
    model("Eval").objects.create(trigger=trigger, policy_version="v1")
    model("Correlation").objects.create(kind="pr", key="octo/app#8", ticket=ticket)
    return {"source": source.pk, "thread": thread.pk, "trigger": trigger.pk,
            "delivery": delivery.pk, "channel": channel.pk, "outgoing": outgoing.pk,
            "ticket": ticket.pk}


def test_rows_written_before_the_move_survive_it_with_their_links(old_schema):
    assert old_schema.get_model("tickets", "Trigger")._meta.db_table == "tickets_trigger"
    old = _old_rows(old_schema)
    view = Permission.objects.get(codename="view_trigger")
    assert view.content_type.app_label == "tickets"

    migrate_to_latest()

    tables = set(connection.introspection.table_names())
    assert {f"intake_{m}" for m in MOVED} <= tables
    assert not {f"tickets_{m}" for m in MOVED} & tables
    assert "tickets_correlation" not in tables
    source = Source.objects.get(pk=old["source"])
    assert (source.slug, source.config, source.health) == (
        "gh", {"repo": ["octo/app"]}, {"rejected": {"bad_signature": 2}})
    trigger = Trigger.objects.get(pk=old["trigger"])
    assert (trigger.source_id, trigger.thread_id, trigger.external_id, trigger.decision,
            trigger.disposition) == (source.pk, old["thread"], "comment:1", "explicit",
                                     "admitted")
    delivery = Delivery.objects.get(pk=old["delivery"])
    assert (bytes(delivery.body), delivery.trigger_id) == (b'{"action":"created"}',
                                                          trigger.pk)
    assert OutgoingMessage.objects.get(pk=old["outgoing"]).text == "On it"
    # Tickets' foreign keys point at the same rows, through the ORM and in the database.
    ticket = Ticket.objects.select_related("thread", "channel").get(pk=old["ticket"])
    assert (ticket.thread.key, ticket.channel.address) == ("octo/app#7", "oc_team")
    assert Mandate.objects.get(ticket=ticket).trigger_id == trigger.pk
    assert Subscription.objects.get(ticket=ticket).thread_id == old["thread"]
    assert Input.objects.get(ticket=ticket).trigger_id == trigger.pk
    assert Eval.objects.get().trigger_id == trigger.pk
    assert list(Thread.objects.get(pk=old["thread"]).tickets.all()) == [ticket]
    with pytest.raises(IntegrityError), transaction.atomic():
        Subscription.objects.filter(ticket=ticket).update(thread_id=10**9)
        connection.check_constraints()  # SQLite checks deferred keys here
    # The permission granted on the old model is the new model's (its content type moved).
    view.refresh_from_db()
    assert view.content_type == ContentType.objects.get_for_model(Trigger)

    # New rows go on after the old ones, unique constraints intact.
    thread = Thread.objects.create(source=source, key="octo/app#9")
    assert thread.pk > old["thread"]
    with pytest.raises(IntegrityError), transaction.atomic():
        Trigger.objects.create(source=source, thread=thread, external_id="comment:1",
                               scope="issue_comment")
    assert Channel.objects.get(pk=old["channel"]).tickets.get() == ticket
