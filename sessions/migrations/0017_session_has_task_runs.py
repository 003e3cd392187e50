from django.db import migrations, models


def flag_sessions_with_task_runs(apps, schema_editor):
    Session = apps.get_model("agent_sessions", "Session")
    TaskRun = apps.get_model("agent_sessions", "TaskRun")
    Session.objects.filter(pk__in=TaskRun.objects.values("session_id")).update(
        has_task_runs=True)


class Migration(migrations.Migration):

    dependencies = [("agent_sessions", "0016_runtime_identity")]

    operations = [
        migrations.AddField(
            model_name="session",
            name="has_task_runs",
            field=models.BooleanField(
                default=False,
                help_text="task runs follow its turns (sessions/task_runs.py): the timeline "
                          "starts a run with its turn, and the turn's end reaches them; set "
                          "when the first run is submitted, so the timeline reads it with the "
                          "session's own row"),
        ),
        migrations.RunPython(flag_sessions_with_task_runs, migrations.RunPython.noop),
    ]
