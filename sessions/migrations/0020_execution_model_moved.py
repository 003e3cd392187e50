"""The execution model's models (experts, presets, bots, instances, task runs, schedules)
moved to the ``execution`` app: only Django's state forgets them here; their tables stay as
they are (``agent_sessions_*``, kept by their ``Meta.db_table``) and execution's 0001 takes
them over. Nothing in the database changes."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0019_warm_pool_identity'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='taskrun',
                    name='instance',
                ),
                migrations.RemoveField(
                    model_name='botprofile',
                    name='agent_profile',
                ),
                migrations.RemoveField(
                    model_name='taskrun',
                    name='profile',
                ),
                migrations.RemoveField(
                    model_name='botprofile',
                    name='launch_preset',
                ),
                migrations.RemoveField(
                    model_name='launchpreset',
                    name='provider',
                ),
                migrations.RemoveField(
                    model_name='schedule',
                    name='owner',
                ),
                migrations.RemoveField(
                    model_name='schedule',
                    name='session',
                ),
                migrations.RemoveField(
                    model_name='schedulerun',
                    name='schedule',
                ),
                migrations.RemoveField(
                    model_name='schedulerun',
                    name='session',
                ),
                migrations.RemoveField(
                    model_name='schedulerun',
                    name='task',
                ),
                migrations.RemoveField(
                    model_name='taskrun',
                    name='owner',
                ),
                migrations.RemoveField(
                    model_name='taskrun',
                    name='session',
                ),
                migrations.DeleteModel(
                    name='AgentInstance',
                ),
                migrations.DeleteModel(
                    name='AgentProfile',
                ),
                migrations.DeleteModel(
                    name='BotProfile',
                ),
                migrations.DeleteModel(
                    name='LaunchPreset',
                ),
                migrations.DeleteModel(
                    name='Schedule',
                ),
                migrations.DeleteModel(
                    name='ScheduleRun',
                ),
                migrations.DeleteModel(
                    name='TaskRun',
                ),
            ],
            database_operations=[],
        ),
    ]
