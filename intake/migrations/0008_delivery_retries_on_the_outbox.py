"""A failed delivery's retries move from the delivery's own `attempts`/`retry_at` to an
`intake.retry` outbox effect per mailbox: each mailbox held back by a failed delivery gets
its effect, due when its retry was, its tries counted on, before the columns go."""

import hashlib
import secrets

from django.db import migrations
from django.db.models import Min
from django.utils import timezone

MAX_KEY = 300  # effects.outbox.MAX_KEY


def _key(mailbox: str) -> str:  # intake.record.retry_key, as it was written
    if len(mailbox) <= MAX_KEY:
        return mailbox
    return f"{mailbox[:MAX_KEY - 65]}#{hashlib.sha256(mailbox.encode()).hexdigest()}"


def retries_to_the_outbox(apps, schema_editor):
    Delivery = apps.get_model("intake", "Delivery")
    Effect = apps.get_model("effects", "Effect")
    heads = (Delivery.objects.filter(processed_at__isnull=True).values("mailbox")
             .annotate(first=Min("id")).values("first"))
    now = timezone.now()
    Effect.objects.bulk_create([
        Effect(kind="intake.retry", key=_key(row.mailbox),
               payload={"source": row.source_id, "mailbox": row.mailbox, "delivery": row.pk},
               version=secrets.randbits(62) + 1, attempts=max(0, row.attempts - 1),
               due_at=max(row.retry_at or now, now), created_at=now)
        for row in Delivery.objects.filter(pk__in=heads).exclude(last_error="")
    ])


class Migration(migrations.Migration):

    dependencies = [
        ('intake', '0007_bounded_inputs'),
        ('effects', '0015_intake_retry_kind'),
    ]

    operations = [
        migrations.RunPython(retries_to_the_outbox, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='delivery',
            name='attempts',
        ),
        migrations.RemoveField(
            model_name='delivery',
            name='retry_at',
        ),
    ]
