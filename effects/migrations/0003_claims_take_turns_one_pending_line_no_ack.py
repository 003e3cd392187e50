"""Claims take turns on one locked row (ClaimTurn) instead of a PostgreSQL advisory lock;
the one-pending-row rule becomes a plain unique constraint on (kind, key, line) so the
enqueue upsert can name it on every database; the `ack` kind, which nothing produced or
handled, goes; versions become random (an upsert cannot count up)."""

from django.db import migrations, models

import effects.models


def first_turn(apps, schema_editor):
    apps.get_model("effects", "ClaimTurn").objects.get_or_create(pk=1)


class Migration(migrations.Migration):

    dependencies = [
        ('effects', '0002_effect_table_and_kinds'),
    ]

    operations = [
        migrations.CreateModel(
            name='ClaimTurn',
            fields=[
                ('id', models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='effect',
            name='effect_one_pending',
        ),
        migrations.AddField(
            model_name='effect',
            name='line',
            field=models.GeneratedField(db_persist=True, expression=models.Case(models.When(state='pending', then=models.Value(True)), default=None), output_field=models.BooleanField(null=True)),
        ),
        migrations.AlterField(
            model_name='effect',
            name='kind',
            field=models.CharField(choices=[('dispatch', 'dispatch an assignment'), ('deliver', 'deliver an input'), ('relay', 'relay a report'), ('notice', 'send a notice'), ('assess', 'run an assessment'), ('session.turn_ended', "report the end of a session's turn")], max_length=40),
        ),
        migrations.AlterField(
            model_name='effect',
            name='version',
            field=models.PositiveBigIntegerField(default=effects.models.new_version),
        ),
        migrations.AddConstraint(
            model_name='effect',
            constraint=models.UniqueConstraint(fields=('kind', 'key', 'line'), name='effect_one_pending'),
        ),
        migrations.AddConstraint(
            model_name='claimturn',
            constraint=models.CheckConstraint(condition=models.Q(('id', 1)), name='claim_turn_one_row'),
        ),
        migrations.RunPython(first_turn, migrations.RunPython.noop),
    ]
