from django.db import migrations
from django.utils import timezone


def fire_unstarted_runs(apps, schema_editor):
    """A run's firing became an outbox effect written with the run (execution/schedules.py):
    a run an older amux wrote and had not set going yet gets its effect, which the Celery
    message (and the 60 s re-send) it was waiting for no longer gives it."""
    ScheduleRun = apps.get_model("execution", "ScheduleRun")
    Effect = apps.get_model("effects", "Effect")
    now = timezone.now()
    for run_id in ScheduleRun.objects.filter(started_at__isnull=True, error_code="") \
            .values_list("pk", flat=True).iterator():
        key = f"run:{run_id}"
        if not Effect.objects.filter(kind="schedule.fire", key=key, state="pending").exists():
            Effect.objects.create(kind="schedule.fire", key=key, payload={"run_id": run_id},
                                  due_at=now)


class Migration(migrations.Migration):

    dependencies = [
        ("execution", "0001_initial"),
        ("effects", "0016_schedule_fire_and_policy_apply_kinds"),
    ]

    operations = [migrations.RunPython(fire_unstarted_runs, migrations.RunPython.noop)]
