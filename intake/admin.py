from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from intake import models


@admin.register(models.Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ["slug", "kind", "name", "enabled"]
    list_filter = ["kind", "enabled"]
    readonly_fields = ["health", "created_at", "updated_at"]

    def get_readonly_fields(self, request, obj=None):
        # Once events arrived, the webhook URL and the policy name the source by its slug.
        fixed = obj is not None and (obj.deliveries.exists() or obj.threads.exists())
        return [*self.readonly_fields, *(["slug"] if fixed else [])]


@admin.register(models.Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "delivery_id", "event", "outcome", "reason", "received_at",
                    "attempts", "retry_at"]
    list_filter = ["source", "outcome"]
    readonly_fields = ["attempts", "last_error", "retry_at"]
    exclude = ["body"]


@admin.register(models.Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "key", "title"]
    search_fields = ["key", "title"]


@admin.register(models.Trigger)
class TriggerAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "scope", "actor", "decision", "reason", "disposition"]
    list_filter = ["source", "decision", "scope"]


admin.site.register(models.Channel, ReadOnlyAdmin)


@admin.register(models.EventAck)
class EventAckAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "cursor", "state", "outcome", "created_at", "acked_at"]
    list_filter = ["source", "state"]


@admin.register(models.GitHubAppSetup)
class GitHubAppSetupAdmin(ReadOnlyAdmin):
    list_display = ["id", "slug", "status", "owner", "org", "web_url", "app_slug", "created_at"]
    list_filter = ["status"]
    exclude = ["state"]  # the single-use token GitHub hands back: never shown
