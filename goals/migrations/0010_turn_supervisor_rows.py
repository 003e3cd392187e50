"""A managed turn's supervisor became an outbox row (goals/turns.py ``drive``) instead of a
chain of ``goals.turn`` tasks and a sweep of stalled envelopes: every envelope in flight
when this runs gets its row, due now, so none waits for a task that no longer comes."""

import secrets

from django.db import migrations
from django.utils import timezone

IN_FLIGHT = ("queued", "running", "validated", "written")
KIND = "goals.turn"


def supervisor_rows(apps, schema_editor):
    GoalTurn = apps.get_model("goals", "GoalTurn")
    Effect = apps.get_model("effects", "Effect")
    now = timezone.now()
    for pk in GoalTurn.objects.filter(state__in=IN_FLIGHT).values_list("pk", flat=True):
        key = f"turn:{pk}"
        if Effect.objects.filter(kind=KIND, key=key, state="pending").exists():
            continue
        Effect.objects.create(kind=KIND, key=key, payload={"turn": pk}, channel="",
                              state="pending", version=secrets.randbits(62) + 1, attempts=0,
                              due_at=now)


class Migration(migrations.Migration):

    dependencies = [
        ("goals", "0009_bounded_inputs"),
        ("effects", "0013_goals_turn_kind"),
    ]

    operations = [
        migrations.RunPython(supervisor_rows, migrations.RunPython.noop),
    ]
