from django.db import migrations
from django.utils import timezone


def apply_unapplied_version(apps, schema_editor):
    """A saved version's application became an outbox effect written with it (policy/
    services.py): a version an older amux saved and had not applied yet gets its effect,
    which the beat sweep it was waiting for no longer gives it."""
    PolicyHead = apps.get_model("policy", "PolicyHead")
    Effect = apps.get_model("effects", "Effect")
    head = PolicyHead.objects.filter(pk=1).first()
    if head is None or not head.version or head.version == head.applied_version:
        return
    key = f"version:{head.version}"
    if not Effect.objects.filter(kind="policy.apply", key=key, state="pending").exists():
        Effect.objects.create(kind="policy.apply", key=key, payload={}, due_at=timezone.now())


class Migration(migrations.Migration):

    dependencies = [
        ("policy", "0003_applied_version"),
        ("effects", "0016_schedule_fire_and_policy_apply_kinds"),
    ]

    operations = [migrations.RunPython(apply_unapplied_version, migrations.RunPython.noop)]
