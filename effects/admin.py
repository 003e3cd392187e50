from django.contrib import admin

from effects import outbox, stats
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
    change_list_template = "admin/effects/effect/change_list.html"

    def changelist_view(self, request, extra_context=None):
        # Above the rows: per kind, what is due, running, waiting, dead, and how old the
        # oldest pending row is (the same figures as `amux doctor`).
        handled = outbox.handlers()
        rows = [
            {"kind": c.kind, "due": c.due, "running": c.running, "waiting": c.waiting,
             "dead": c.dead, "handled": c.kind in handled,
             "oldest": stats.age(c.oldest_seconds) if c.oldest_seconds is not None else ""}
            for c in stats.by_kind()
        ]
        return super().changelist_view(request, {**(extra_context or {}),
                                                 "outbox_by_kind": rows})

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
