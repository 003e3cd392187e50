"""The execution model's models, taken over from sessions (its 0019 forgets them): a
state-only move. Their tables already exist under their old names (``Meta.db_table``), so
nothing is created or copied. The content types (and with them the permissions granted and
the admin's log) are renamed to this app, so that nothing granted is lost."""

import amux_common.bounds
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


MOVED = ['agentprofile', 'launchpreset', 'botprofile', 'agentinstance', 'taskrun', 'schedule', 'schedulerun']


def _relabel(apps, old: str, new: str) -> None:
    content_types = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_types.objects.filter(app_label=new, model=model).exists():
            content_types.objects.filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, "agent_sessions", "execution")


def backwards(apps, schema_editor):
    _relabel(apps, "execution", "agent_sessions")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('agent_sessions', '0020_execution_model_moved'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='AgentProfile',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(max_length=60, unique=True)),
                        ('name', models.CharField(max_length=120)),
                        ('description', models.TextField(blank=True, max_length=2000)),
                        ('instructions', models.TextField(blank=True, max_length=65536)),
                        ('skills', models.JSONField(blank=True, default=list, validators=[amux_common.bounds.JsonBytes(4194304)])),
                        ('builtin', models.BooleanField(default=False)),
                        ('revision', models.PositiveIntegerField(default=1, help_text='counts content edits')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        'db_table': 'agent_sessions_agentprofile',
                        'ordering': ['-builtin', 'slug'],
                    },
                ),
                migrations.CreateModel(
                    name='AgentInstance',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=120)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='agent_instances', to=settings.AUTH_USER_MODEL)),
                        ('session', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='instance', to='agent_sessions.session')),
                        ('profile', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='instances', to='execution.agentprofile')),
                    ],
                    options={
                        'db_table': 'agent_sessions_agentinstance',
                        'ordering': ['-id'],
                    },
                ),
                migrations.CreateModel(
                    name='LaunchPreset',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(max_length=60, unique=True)),
                        ('runtime', models.CharField(max_length=20)),
                        ('model', models.CharField(max_length=120)),
                        ('effort', models.CharField(blank=True, max_length=20)),
                        ('permission', models.CharField(blank=True, help_text='bypass or ask; blank: the native bypass', max_length=20)),
                        ('extra_args', models.JSONField(blank=True, default=list, validators=[amux_common.bounds.JsonBytes(131072)])),
                        ('is_default', models.BooleanField(default=False)),
                        ('builtin', models.BooleanField(default=False)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('provider', models.ForeignKey(blank=True, help_text="provider binding; none: the runtime's only one", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='presets', to='agent_sessions.providerprofile')),
                    ],
                    options={
                        'db_table': 'agent_sessions_launchpreset',
                        'ordering': ['slug'],
                    },
                ),
                migrations.CreateModel(
                    name='BotProfile',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(max_length=60, unique=True)),
                        ('name', models.CharField(max_length=120)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('agent_profile', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='bots', to='execution.agentprofile')),
                        ('launch_preset', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='bots', to='execution.launchpreset')),
                    ],
                    options={
                        'db_table': 'agent_sessions_botprofile',
                        'ordering': ['slug'],
                    },
                ),
                migrations.CreateModel(
                    name='Schedule',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=120)),
                        ('cron', models.CharField(blank=True, help_text='five fields, UTC', max_length=120)),
                        ('every_seconds', models.PositiveIntegerField(blank=True, null=True)),
                        ('mode', models.CharField(choices=[('reuse-session', 'one session kept for the schedule'), ('new-session-per-run', 'a fresh session per firing'), ('subtask', 'a bounded task per firing')], max_length=24)),
                        ('prompt', models.TextField(max_length=65536)),
                        ('profile', models.CharField(blank=True, help_text="the expert's slug", max_length=60)),
                        ('execution', models.JSONField(blank=True, default=dict, help_text='frozen settings')),
                        ('paused', models.BooleanField(default=False)),
                        ('anchor', models.DateTimeField(help_text='interval slots count from here')),
                        ('next_fire_at', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='schedules', to=settings.AUTH_USER_MODEL)),
                        ('session', models.ForeignKey(blank=True, help_text='reuse-session: the one session', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agent_sessions.session')),
                    ],
                    options={
                        'db_table': 'agent_sessions_schedule',
                        'ordering': ['-id'],
                    },
                ),
                migrations.CreateModel(
                    name='TaskRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('prompt', models.TextField(max_length=65536)),
                        ('turn_key', models.CharField(help_text='the key of the turn it posted', max_length=120)),
                        ('state', models.CharField(choices=[('queued', 'queued'), ('running', 'running'), ('succeeded', 'succeeded'), ('failed', 'failed'), ('cancelled', 'cancelled')], default='queued', max_length=10)),
                        ('result', models.TextField(blank=True, help_text="the agent's final answer")),
                        ('error_code', models.CharField(blank=True, max_length=60)),
                        ('error_message', models.TextField(blank=True)),
                        ('execution', models.JSONField(blank=True, default=dict, help_text='frozen settings')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('ended_at', models.DateTimeField(blank=True, null=True)),
                        ('instance', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='task_runs', to='execution.agentinstance')),
                        ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='task_runs', to=settings.AUTH_USER_MODEL)),
                        ('profile', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='task_runs', to='execution.agentprofile')),
                        ('session', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='task_runs', to='agent_sessions.session')),
                    ],
                    options={
                        'db_table': 'agent_sessions_taskrun',
                        'ordering': ['-id'],
                    },
                ),
                migrations.CreateModel(
                    name='ScheduleRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slot', models.DateTimeField()),
                        ('fired_at', models.DateTimeField(auto_now_add=True)),
                        ('started_at', models.DateTimeField(blank=True, help_text='when its session or task was set going', null=True)),
                        ('turn_key', models.CharField(blank=True, max_length=120)),
                        ('error_code', models.CharField(blank=True, max_length=60)),
                        ('error_message', models.TextField(blank=True)),
                        ('schedule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='execution.schedule')),
                        ('session', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agent_sessions.session')),
                        ('task', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='execution.taskrun')),
                    ],
                    options={
                        'db_table': 'agent_sessions_schedulerun',
                        'ordering': ['-slot'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='agentinstance',
                    constraint=models.UniqueConstraint(fields=('owner', 'name'), name='instance_unique_name'),
                ),
                migrations.AddConstraint(
                    model_name='launchpreset',
                    constraint=models.UniqueConstraint(condition=models.Q(('is_default', True)), fields=('is_default',), name='one_default_preset'),
                ),
                migrations.AddIndex(
                    model_name='schedule',
                    index=models.Index(condition=models.Q(('paused', False)), fields=['next_fire_at'], name='schedule_due'),
                ),
                migrations.AddConstraint(
                    model_name='schedule',
                    constraint=models.UniqueConstraint(fields=('owner', 'name'), name='schedule_unique_name'),
                ),
                migrations.AddConstraint(
                    model_name='schedule',
                    constraint=models.CheckConstraint(condition=models.Q(models.Q(('cron', ''), ('every_seconds__gte', 10)), models.Q(models.Q(('cron', ''), _negated=True), ('every_seconds__isnull', True)), _connector='OR'), name='schedule_one_timing'),
                ),
                migrations.AddIndex(
                    model_name='taskrun',
                    index=models.Index(fields=['session', 'turn_key'], name='task_run_turn'),
                ),
                migrations.AddIndex(
                    model_name='schedulerun',
                    index=models.Index(condition=models.Q(('error_code', ''), ('started_at__isnull', True)), fields=['fired_at'], name='schedule_run_unstarted'),
                ),
                migrations.AddConstraint(
                    model_name='schedulerun',
                    constraint=models.UniqueConstraint(fields=('schedule', 'slot'), name='schedule_run_unique_slot'),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
