from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from prompts_app.models import BuiltinText, PromptVersion


@admin.register(PromptVersion)
class PromptVersionAdmin(ReadOnlyAdmin):
    list_display = ["revision", "predecessor", "origin", "author", "at"]


@admin.register(BuiltinText)
class BuiltinTextAdmin(ReadOnlyAdmin):
    list_display = ["key", "hash", "first_seen"]
