"""Events of a source with a cursor, each kept until it is acknowledged (intake/acks.py)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('intake', '0003_delivery_retries'),
    ]

    operations = [
        migrations.CreateModel(
            name='EventAck',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('cursor', models.CharField(help_text='the cursor\'s name, e.g. doc:<type>:<token>', max_length=200)),
                ('item', models.CharField(help_text="the provider's id of the event", max_length=200)),
                ('at', models.BigIntegerField(help_text="the provider's create time (s), the cursor's order")),
                ('order', models.CharField(help_text='ties within one second', max_length=400)),
                ('delivery_id', models.CharField(max_length=200)),
                ('state', models.CharField(choices=[('captured', 'captured'), ('replying', 'reply due'), ('acked', 'acknowledged')], default='captured', max_length=10)),
                ('outcome', models.CharField(blank=True, max_length=40)),
                ('reply_ref', models.CharField(blank=True, help_text='the reply as read back from the provider', max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('acked_at', models.DateTimeField(blank=True, null=True)),
                ('source', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='acks', to='intake.source')),
            ],
            options={
                'ordering': ['at', 'order'],
                'constraints': [models.UniqueConstraint(fields=('source', 'cursor', 'item'), name='event_ack_unique_item')],
            },
        ),
    ]
