from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from execution import models


# the execution model: read-only here, changed through the panel and the REST API (where
# manifests are checked and built-ins protected)
@admin.register(models.AgentProfile)
class AgentProfileAdmin(ReadOnlyAdmin):
    list_display = ["slug", "name", "builtin", "revision"]


@admin.register(models.LaunchPreset)
class LaunchPresetAdmin(ReadOnlyAdmin):
    list_display = ["slug", "runtime", "model", "permission", "is_default"]


@admin.register(models.BotProfile)
class BotProfileAdmin(ReadOnlyAdmin):
    list_display = ["slug", "name", "agent_profile", "launch_preset"]


@admin.register(models.AgentInstance)
class AgentInstanceAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "owner", "profile", "session"]


@admin.register(models.TaskRun)
class TaskRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "owner", "state", "session", "instance", "created_at"]
    list_filter = ["state"]


# schedules: read-only here, changed through the panel, the REST API and the CLI
@admin.register(models.Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "owner", "mode", "cron", "every_seconds", "paused",
                    "next_fire_at"]
    list_filter = ["mode", "paused"]


@admin.register(models.ScheduleRun)
class ScheduleRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "schedule", "slot", "started_at", "session", "task", "error_code"]
