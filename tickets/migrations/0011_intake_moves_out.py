"""The intake models now belong to the `intake` app (intake/0001 adopted their tables):
tickets' foreign keys point there and the models leave tickets' state only, so the tables
and their rows are kept. `Correlation` (never written: a pull request joins its ticket
through a subscription) is dropped for real."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('intake', '0001_from_tickets'),
        ('tickets', '0010_guards'),
    ]

    operations = [
        migrations.DeleteModel(
            name='Correlation',
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='ticket',
                    name='channel',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='tickets', to='intake.channel'),
                ),
                migrations.RemoveField(
                    model_name='delivery',
                    name='source',
                ),
                migrations.RemoveField(
                    model_name='delivery',
                    name='trigger',
                ),
                migrations.RemoveField(
                    model_name='outgoingmessage',
                    name='source',
                ),
                migrations.RemoveField(
                    model_name='thread',
                    name='source',
                ),
                migrations.RemoveField(
                    model_name='trigger',
                    name='source',
                ),
                migrations.RemoveField(
                    model_name='trigger',
                    name='thread',
                ),
                migrations.AlterField(
                    model_name='subscription',
                    name='thread',
                    field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='subscription', to='intake.thread'),
                ),
                migrations.AlterField(
                    model_name='ticket',
                    name='thread',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='tickets', to='intake.thread'),
                ),
                migrations.AlterField(
                    model_name='eval',
                    name='trigger',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='evals', to='intake.trigger'),
                ),
                migrations.AlterField(
                    model_name='input',
                    name='trigger',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='inputs', to='intake.trigger'),
                ),
                migrations.AlterField(
                    model_name='mandate',
                    name='trigger',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='mandates', to='intake.trigger'),
                ),
                migrations.DeleteModel(
                    name='Channel',
                ),
                migrations.DeleteModel(
                    name='Delivery',
                ),
                migrations.DeleteModel(
                    name='OutgoingMessage',
                ),
                migrations.DeleteModel(
                    name='Source',
                ),
                migrations.DeleteModel(
                    name='Thread',
                ),
                migrations.DeleteModel(
                    name='Trigger',
                ),
            ],
            database_operations=[],
        ),
    ]
