"""Now that `intake` owns its models: their tables get the app's names (`intake_source`,
… rows kept; foreign keys of other tables follow the renamed tables), and the content
types follow the models so the admin permissions granted on them stay granted."""

from django.db import migrations

MODELS = ('source', 'delivery', 'thread', 'trigger', 'channel', 'outgoingmessage')


def _move_content_types(apps, schema_editor, source, target):
    ContentType = apps.get_model('contenttypes', 'ContentType')
    for model in MODELS:
        if ContentType.objects.filter(app_label=target, model=model).exists():
            continue  # post_migrate already made one for the new app; keep it
        ContentType.objects.filter(app_label=source, model=model).update(app_label=target)


def forwards(apps, schema_editor):
    _move_content_types(apps, schema_editor, 'tickets', 'intake')


def backwards(apps, schema_editor):
    _move_content_types(apps, schema_editor, 'intake', 'tickets')


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('intake', '0001_from_tickets'),
        ('tickets', '0011_intake_moves_out'),
    ]

    operations = [
        *(migrations.AlterModelTable(name=model, table=None) for model in MODELS),
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
