"""Now that `effects` owns the outbox: its table gets the app's name (`effects_effect`,
rows kept), kinds get room for dotted names (`session.turn_ended`), and the content type
follows the model so the admin permissions granted on it stay granted."""

from django.db import migrations, models


def _move_content_type(apps, schema_editor, source, target):
    ContentType = apps.get_model('contenttypes', 'ContentType')
    if ContentType.objects.filter(app_label=target, model='effect').exists():
        return  # post_migrate already made one for the new app (an old install); keep it
    ContentType.objects.filter(app_label=source, model='effect').update(app_label=target)


def forwards(apps, schema_editor):
    _move_content_type(apps, schema_editor, 'tickets', 'effects')


def backwards(apps, schema_editor):
    _move_content_type(apps, schema_editor, 'effects', 'tickets')


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('effects', '0001_effect_from_tickets'),
        ('tickets', '0009_effect_moves_to_effects'),
    ]

    operations = [
        migrations.AlterModelTable(name='effect', table=None),
        migrations.AlterField(
            model_name='effect',
            name='kind',
            field=models.CharField(choices=[('dispatch', 'dispatch an assignment'), ('deliver', 'deliver an input'), ('relay', 'relay a report'), ('notice', 'send a notice'), ('assess', 'run an assessment'), ('ack', 'acknowledge a source event'), ('session.turn_ended', "report the end of a session's turn")], max_length=40),
        ),
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
