"""Policy versions: immutable, identified by a hash of their canonical content.

Each save appends one ``PolicyVersion`` row (the history); ``PolicyHead`` is the single row
naming the current version, and a save swaps it only if it still names the save's base, so
a stale save writes nothing. Saving content equal to an older version appends a new history
row carrying the same hash (equal content, same id).
"""

from django.core.exceptions import ValidationError
from django.db import models


class PolicyVersion(models.Model):
    version = models.CharField(max_length=64, db_index=True, help_text="content hash")
    base_version = models.CharField(max_length=64, blank=True)
    document = models.JSONField(help_text="canonical document: acceptance and sources")
    author = models.CharField(max_length=150, blank=True)
    origin = models.CharField(max_length=20, default="api", help_text="api or panel")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return self.version[:12]

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValidationError("a policy version cannot be changed once written")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError("a policy version cannot be deleted")


class PolicyHead(models.Model):
    """The one row (pk 1) naming the current version; '' before the first save."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    version = models.CharField(max_length=64, blank=True)
    entry = models.ForeignKey(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    applied_version = models.CharField(
        max_length=64, blank=True,
        help_text="the last version whose effects on live work were applied")
    updated_at = models.DateTimeField(auto_now=True)
