"""Admin building blocks: the admin is for audit, so most records are read-only."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shows everything, changes nothing (immutable or engine-owned records)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
