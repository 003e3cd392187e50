from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from sessions import models
from sessions.provider_form import ProviderForm


@admin.register(models.ProviderProfile)
class ProviderProfileAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ["slug", "platform", "base_url", "key_set"]
    readonly_fields = ["key_set"]

    def get_fields(self, request, obj=None):
        # the form has "remove the stored key" only when there is one to remove
        fields = ["slug", "platform", "base_url", "models_text", "api_key"]
        return [*fields, "clear_key"] if obj else fields

    @admin.display(boolean=True, description="key set")
    def key_set(self, obj) -> bool:
        return bool((obj.secrets or {}).get("api_key"))


@admin.register(models.ProviderProbe)
class ProviderProbeAdmin(ReadOnlyAdmin):
    list_display = ["provider", "revision", "probed_at", "ok", "outcome", "status_code"]


@admin.register(models.Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "runtime", "model", "lifecycle", "lease_owner"]
    list_filter = ["runtime", "lifecycle"]


@admin.register(models.Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "seq", "state", "error_code"]


@admin.register(models.TimelineEvent)
class TimelineEventAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "seq", "type", "at"]


@admin.register(models.UsageDay)
class UsageDayAdmin(ReadOnlyAdmin):
    list_display = ["session", "day", "tokens"]


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


@admin.register(models.WatchdogSettings)
class WatchdogSettingsAdmin(ReadOnlyAdmin):
    list_display = ["id", "limits", "updated_at"]


# schedules: read-only here, changed through the panel, the REST API and the CLI
@admin.register(models.Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "owner", "mode", "cron", "every_seconds", "paused",
                    "next_fire_at"]
    list_filter = ["mode", "paused"]


@admin.register(models.ScheduleRun)
class ScheduleRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "schedule", "slot", "started_at", "session", "task", "error_code"]
