from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from tickets import models


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
    models.TicketMessage,
]:
    admin.site.register(model, ReadOnlyAdmin)
