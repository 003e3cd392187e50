"""Sources, deliveries, threads, triggers, channels and outgoing messages move from
`tickets` to `intake` without touching the database: their tables, rows, indexes and
constraints stay as they are; only Django's idea of which app owns them changes (tickets'
0011 drops them from tickets' state and points its foreign keys here). The tables get
intake's names in 0002. A fresh database gets the tables from tickets' 0001, as before."""

import django.db.models.deletion
from django.db import migrations, models

import amux_common.secrets


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('tickets', '0010_guards'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Source',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('github', 'GitHub'), ('lark', 'Lark'), ('webchat', 'Web chat')], max_length=20)),
                        ('slug', models.SlugField(max_length=60, unique=True)),
                        ('name', models.CharField(max_length=120)),
                        ('enabled', models.BooleanField(default=True)),
                        ('config', models.JSONField(blank=True, default=dict)),
                        ('secrets', amux_common.secrets.EncryptedJSONField(blank=True, default=dict, editable=False)),
                        ('health', models.JSONField(blank=True, default=dict, editable=False)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        'db_table': 'tickets_source',
                        'ordering': ['slug'],
                    },
                ),
                migrations.CreateModel(
                    name='Thread',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(max_length=300)),
                        ('title', models.CharField(blank=True, max_length=300)),
                        ('url', models.URLField(blank=True, max_length=500)),
                        ('meta', models.JSONField(blank=True, default=dict)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('source', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='threads', to='intake.source')),
                    ],
                    options={
                        'db_table': 'tickets_thread',
                    },
                ),
                migrations.CreateModel(
                    name='Trigger',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('external_id', models.CharField(max_length=300)),
                        ('scope', models.CharField(max_length=40)),
                        ('actor', models.CharField(blank=True, max_length=200)),
                        ('is_human', models.BooleanField(default=True)),
                        ('is_bot', models.BooleanField(default=False)),
                        ('addressed', models.BooleanField(default=False)),
                        ('receives_all', models.BooleanField(default=False)),
                        ('text', models.TextField(blank=True)),
                        ('meta', models.JSONField(blank=True, default=dict)),
                        ('decision', models.CharField(blank=True, choices=[('explicit', 'explicit request'), ('inferred', 'inferred candidate'), ('ignore', 'ignored')], max_length=10)),
                        ('strength', models.CharField(blank=True, choices=[('explicit', 'explicit'), ('inferred', 'inferred')], max_length=10)),
                        ('rule', models.CharField(blank=True, max_length=120)),
                        ('reason', models.CharField(blank=True, max_length=80)),
                        ('policy_version', models.CharField(blank=True, max_length=64)),
                        ('disposition', models.CharField(blank=True, help_text='What became of it: admitted, ignored, subscribed, evaluating, handed_back…', max_length=20)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('source', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='triggers', to='intake.source')),
                        ('thread', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='triggers', to='intake.thread')),
                    ],
                    options={
                        'db_table': 'tickets_trigger',
                        'ordering': ['-id'],
                    },
                ),
                migrations.CreateModel(
                    name='Delivery',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('delivery_id', models.CharField(max_length=200)),
                        ('event', models.CharField(blank=True, max_length=100)),
                        ('mailbox', models.CharField(blank=True, help_text='<source>:<thread>', max_length=400)),
                        ('headers', models.JSONField(blank=True, default=dict)),
                        ('body', models.BinaryField()),
                        ('received_at', models.DateTimeField(auto_now_add=True)),
                        ('processed_at', models.DateTimeField(blank=True, null=True)),
                        ('outcome', models.CharField(blank=True, max_length=40)),
                        ('reason', models.CharField(blank=True, max_length=80)),
                        ('source', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='deliveries', to='intake.source')),
                        ('trigger', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='intake.trigger')),
                    ],
                    options={
                        'db_table': 'tickets_delivery',
                    },
                ),
                migrations.CreateModel(
                    name='OutgoingMessage',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('thread_key', models.CharField(max_length=300)),
                        ('message_id', models.CharField(max_length=200)),
                        ('text', models.TextField()),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('source', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='outgoing', to='intake.source')),
                    ],
                    options={
                        'db_table': 'tickets_outgoingmessage',
                        'ordering': ['id'],
                        'constraints': [models.UniqueConstraint(fields=('source', 'message_id'), name='outgoing_unique_message')],
                    },
                ),
                migrations.CreateModel(
                    name='Channel',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('thread', 'source thread'), ('chat', 'chat')], default='thread', max_length=10)),
                        ('address', models.CharField(max_length=300)),
                        ('name', models.CharField(blank=True, max_length=200)),
                        ('source', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='channels', to='intake.source')),
                    ],
                    options={
                        'db_table': 'tickets_channel',
                        'constraints': [models.UniqueConstraint(fields=('source', 'address'), name='channel_unique_address')],
                    },
                ),
                migrations.AddConstraint(
                    model_name='thread',
                    constraint=models.UniqueConstraint(fields=('source', 'key'), name='thread_unique_key'),
                ),
                migrations.AddConstraint(
                    model_name='trigger',
                    constraint=models.UniqueConstraint(fields=('source', 'external_id'), name='trigger_unique_id'),
                ),
                migrations.AddIndex(
                    model_name='delivery',
                    index=models.Index(condition=models.Q(('processed_at__isnull', True)), fields=['mailbox', 'id'], name='delivery_unprocessed'),
                ),
                migrations.AddConstraint(
                    model_name='delivery',
                    constraint=models.UniqueConstraint(fields=('source', 'delivery_id'), name='delivery_unique_id'),
                ),
            ],
            database_operations=[],
        ),
    ]
