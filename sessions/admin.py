from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from sessions import models


@admin.register(models.ProviderProfile)
class ProviderProfileAdmin(admin.ModelAdmin):
    list_display = ["slug", "platform", "base_url"]


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
