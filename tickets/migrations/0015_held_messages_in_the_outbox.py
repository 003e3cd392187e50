"""A message the hourly cap holds is an outbox row from the moment it is decided (due when
the hour rolls over; tickets/actions/messages.py) instead of waiting in `TicketMessage`
alone for a sweep to release it. Every message held when this runs gets its row, due now:
its handler releases it if it fits in the hour, or lets it wait for the next one."""

import secrets

from django.db import migrations
from django.utils import timezone


def held_rows(apps, schema_editor):
    TicketMessage = apps.get_model("tickets", "TicketMessage")
    Effect = apps.get_model("effects", "Effect")
    now = timezone.now()
    for message in TicketMessage.objects.filter(released_at__isnull=True).order_by("pk"):
        if Effect.objects.filter(kind=message.kind, key=message.key, state="pending").exists():
            continue
        Effect.objects.create(kind=message.kind, key=message.key, payload=message.payload,
                              channel=message.channel, state="pending",
                              version=secrets.randbits(62) + 1, attempts=0, due_at=now)


class Migration(migrations.Migration):

    dependencies = [
        ("tickets", "0014_main_session_router"),
        ("effects", "0014_queued_ingress_ordered"),
    ]

    operations = [
        migrations.RunPython(held_rows, migrations.RunPython.noop),
    ]
