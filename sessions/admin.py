from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from sessions import models, provider_actions
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

    def save_model(self, request, obj, form, change):
        form.save()  # through sessions.provider_actions, the one writer

    def delete_model(self, request, obj):
        provider_actions.delete(obj)

    def delete_queryset(self, request, queryset):
        for provider in queryset:
            provider_actions.delete(provider)

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


@admin.register(models.WatchdogSettings)
class WatchdogSettingsAdmin(ReadOnlyAdmin):
    list_display = ["id", "limits", "updated_at"]
