"""Prompt configuration versions: each save is an immutable whole configuration."""

from django.db import models


class PromptVersion(models.Model):
    revision = models.PositiveIntegerField(unique=True)
    predecessor = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="successors"
    )
    config = models.JSONField(default=dict)
    origin = models.CharField(max_length=20, default="panel")
    author = models.CharField(max_length=150, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-revision"]
