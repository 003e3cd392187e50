"""Prompt configuration versions: each save is an immutable whole configuration."""

from django.db import models

ONE_PER_REVISION = "prompt_version_one_per_revision"


class ImmutableError(Exception):
    pass


class PromptVersion(models.Model):
    """One saved configuration (see prompts_app/core.py for the shape of `config`).

    Immutable: a version is never changed or deleted; restoring an old version or a default
    creates a new one.
    """

    revision = models.PositiveIntegerField()
    predecessor = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="successors"
    )
    config = models.JSONField(default=dict)
    origin = models.CharField(max_length=20, default="panel")
    author = models.CharField(max_length=150, blank=True)
    summary = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-revision"]
        constraints = [
            # Two saves on one base revision: the second breaks this and is told it is stale.
            models.UniqueConstraint(fields=["revision"], name=ONE_PER_REVISION),
        ]

    def __str__(self):
        return f"revision {self.revision}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ImmutableError("prompt versions are immutable; save a new version")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ImmutableError("prompt versions are immutable")



class BuiltinText(models.Model):
    """Every built-in fragment text ever in effect, by content hash, so an old version can be
    read exactly as it was even after an upgrade replaced the files."""

    hash = models.CharField(max_length=64, unique=True)
    key = models.CharField(max_length=80)
    text = models.TextField()
    first_seen = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.key} {self.hash[:12]}"
