"""The Effect model moves from `tickets` to `effects` without touching the database: the
table `tickets_effect`, its rows, indexes and constraints stay as they are; only Django's
idea of which app owns them changes (tickets' 0008 drops it from tickets' state). The
table is renamed in 0002. A fresh database gets the table from tickets' 0001, as before."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('tickets', '0007_source_indexes_covered_by_unique'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Effect',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('dispatch', 'dispatch an assignment'), ('deliver', 'deliver an input'), ('relay', 'relay a report'), ('notice', 'send a notice'), ('assess', 'run an assessment'), ('ack', 'acknowledge a source event')], max_length=10)),
                        ('key', models.CharField(max_length=300)),
                        ('payload', models.JSONField(blank=True, default=dict)),
                        ('channel', models.CharField(blank=True, help_text='order key (relay, notice)', max_length=300)),
                        ('state', models.CharField(choices=[('pending', 'pending'), ('dead', 'dead letter')], default='pending', max_length=10)),
                        ('version', models.PositiveIntegerField(default=1)),
                        ('attempts', models.PositiveIntegerField(default=0)),
                        ('due_at', models.DateTimeField()),
                        ('claimed_by', models.CharField(blank=True, max_length=120)),
                        ('claimed_until', models.DateTimeField(blank=True, null=True)),
                        ('last_error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'tickets_effect',
                        'ordering': ['id'],
                        'indexes': [
                            models.Index(condition=models.Q(('state', 'pending')), fields=['kind', 'id'], name='effect_line'),
                            models.Index(condition=models.Q(('kind__in', ['relay', 'notice']), ('state', 'pending')), fields=['channel', 'id'], name='effect_ordered'),
                            models.Index(condition=models.Q(('claimed_until__isnull', False), ('state', 'pending')), fields=['kind', 'claimed_until'], name='effect_leased'),
                        ],
                        'constraints': [models.UniqueConstraint(condition=models.Q(('state', 'pending')), fields=('kind', 'key'), name='effect_one_pending')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
