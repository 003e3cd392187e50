from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from effects.models import Effect, EffectState
from intake import models, record


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
                    "processed_at"]
    list_filter = ["source", "outcome"]
    readonly_fields = ["last_error", "retry"]
    exclude = ["body"]

    @admin.display(description="retry")
    def retry(self, obj) -> str:
        """Where a failed delivery's retry stands: its mailbox's row in the outbox (whose
        admin puts a dead letter back in line)."""
        if obj.processed_at is not None or not obj.last_error:
            return "-"
        effect = (Effect.objects.filter(kind=record.RETRY_EFFECT,
                                        key=record.retry_key(obj.mailbox))
                  .order_by("-id").first())
        if effect is None:
            return "none"
        if effect.state == EffectState.DEAD:
            return f"dead letter {effect.pk}: failed tries {effect.attempts}"
        return f"effect {effect.pk}: failed tries {effect.attempts}, next at {effect.due_at}"


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
