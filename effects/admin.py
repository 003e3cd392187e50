from django.contrib import admin

from effects import outbox
from effects.models import Effect


@admin.register(Effect)
class EffectAdmin(admin.ModelAdmin):
    """The outbox, with dead letters retryable by an operator."""

    list_display = [
        "id", "kind", "key", "channel", "state", "attempts", "due_at", "claimed_by",
        "handled", "last_error",
    ]
    list_filter = ["state", "kind"]
    search_fields = ["key", "channel"]
    actions = ["retry"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(boolean=True, description="has a handler")
    def handled(self, obj):
        # A row of a kind nobody handles waits for ever: show it rather than let it hide.
        return obj.kind in outbox.handlers()

    @admin.action(description="Retry the selected dead letters now")
    def retry(self, request, queryset):
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
