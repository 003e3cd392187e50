"""A delivery whose plugin or gate failed keeps its error and when it is tried again."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('intake', '0002_intake_tables'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='delivery',
            options={'verbose_name_plural': 'deliveries'},
        ),
        migrations.AddField(
            model_name='delivery',
            name='attempts',
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name='delivery',
            name='last_error',
            field=models.TextField(blank=True, editable=False),
        ),
        migrations.AddField(
            model_name='delivery',
            name='retry_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
