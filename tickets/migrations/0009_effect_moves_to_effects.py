"""The Effect model now belongs to the `effects` app (effects/0001 adopted its table):
drop it from tickets' state only, so the table and its rows are kept."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tickets', '0008_assignment_failure'),
        ('effects', '0001_effect_from_tickets'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='Effect')],
            database_operations=[],
        ),
    ]
