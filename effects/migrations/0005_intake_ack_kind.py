"""The effect that replies to a source event, reads the reply back and acknowledges it."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('effects', '0004_task_turn_ended_kind'),
    ]

    operations = [
        migrations.AlterField(
            model_name='effect',
            name='kind',
            field=models.CharField(choices=[('dispatch', 'dispatch an assignment'), ('deliver', 'deliver an input'), ('relay', 'relay a report'), ('notice', 'send a notice'), ('assess', 'run an assessment'), ('session.turn_ended', "report the end of a session's turn"), ('task.turn_ended', 'settle the task run of an ended turn'), ('intake.ack', 'reply to a source event, read it back, acknowledge it')], max_length=40),
        ),
    ]
