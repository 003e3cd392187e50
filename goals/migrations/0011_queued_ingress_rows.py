"""The session queue's order moved into the outbox (goals/queue.py): one ordered row per
queued item (key ``item:<id>``, one channel per session) instead of one row per session
(key ``session:<id>``). Each queued item gets its row, in order; the session rows go."""

import secrets

from django.db import migrations
from django.utils import timezone

KIND = "goals.queue_dispatch"


def item_rows(apps, schema_editor):
    QueuedIngress = apps.get_model("goals", "QueuedIngress")
    Effect = apps.get_model("effects", "Effect")
    now = timezone.now()
    for item in QueuedIngress.objects.filter(state="queued").order_by("pk"):
        key = f"item:{item.pk}"
        if Effect.objects.filter(kind=KIND, key=key, state="pending").exists():
            continue
        Effect.objects.create(kind=KIND, key=key, payload={"item": item.pk},
                              channel=f"goals.queue:{item.session_id}", state="pending",
                              version=secrets.randbits(62) + 1, attempts=0, due_at=now)
    Effect.objects.filter(kind=KIND, key__startswith="session:", state="pending").delete()


class Migration(migrations.Migration):

    dependencies = [
        ("goals", "0010_turn_supervisor_rows"),
        ("effects", "0014_queued_ingress_ordered"),
    ]

    operations = [
        migrations.RunPython(item_rows, migrations.RunPython.noop),
    ]
