from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from policy.models import PolicyVersion


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ["version", "base_version", "author", "origin", "created_at"]
