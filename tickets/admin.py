from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from tickets import models


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
    list_display = ["id", "source", "delivery_id", "event", "outcome", "reason", "received_at"]
    list_filter = ["source", "outcome"]
    exclude = ["body"]


@admin.register(models.Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "key", "title"]
    search_fields = ["key", "title"]


@admin.register(models.Trigger)
class TriggerAdmin(ReadOnlyAdmin):
    list_display = ["id", "source", "scope", "actor", "decision", "reason", "disposition"]
    list_filter = ["source", "decision", "scope"]


@admin.register(models.Eval)
class EvalAdmin(ReadOnlyAdmin):
    list_display = ["id", "trigger", "state", "result", "policy_version"]


@admin.register(models.Ticket)
class TicketAdmin(ReadOnlyAdmin):
    list_display = ["id", "short_name", "title", "created_at", "ended_at"]


@admin.register(models.Mandate)
class MandateAdmin(ReadOnlyAdmin):
    list_display = ["id", "ticket", "policy_version", "scope", "strength", "rule", "requester"]


for model in [
    models.Subscription,
    models.Assignment,
    models.Input,
    models.Report,
    models.Question,
    models.Channel,
    models.Correlation,
]:
    admin.site.register(model, ReadOnlyAdmin)


@admin.register(models.Effect)
class EffectAdmin(admin.ModelAdmin):
    """The outbox, with dead letters retryable by an operator."""

    list_display = [
        "id", "kind", "key", "channel", "state", "attempts", "due_at", "claimed_by", "last_error"
    ]
    list_filter = ["state", "kind"]
    search_fields = ["key", "channel"]
    actions = ["retry"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Retry the selected dead letters now")
    def retry(self, request, queryset):
        from tickets import outbox

        selected = list(queryset.values_list("pk", flat=True))
        count = outbox.retry_dead(selected)
        self.message_user(request, f"{count} effect(s) queued again.")
        if count < len(selected):
            self.message_user(
                request,
                f"{len(selected) - count} left as they are: not dead letters, or a newer"
                " payload of the same key is already pending.",
                level="warning",
            )
