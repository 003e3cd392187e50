from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tickets", "0007_source_indexes_covered_by_unique"),
    ]

    operations = [
        migrations.AddField(
            model_name="assignment",
            name="failure_code",
            field=models.CharField(blank=True, max_length=60),
        ),
        migrations.AddField(
            model_name="assignment",
            name="failure_message",
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name="input",
            name="failure",
            field=models.TextField(blank=True),
        ),
    ]
