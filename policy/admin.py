from django.contrib import admin

from amux_common.admin import ReadOnlyAdmin
from policy.models import PolicyHead, PolicyVersion


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ["id", "version", "base_version", "author", "origin", "created_at"]


@admin.register(PolicyHead)
class PolicyHeadAdmin(ReadOnlyAdmin):
    list_display = ["id", "version", "entry", "updated_at"]
