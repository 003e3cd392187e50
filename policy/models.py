"""Policy versions: immutable, identified by a hash of their canonical content."""

from django.db import models


class PolicyVersion(models.Model):
    version = models.CharField(max_length=64, unique=True, help_text="content hash")
    base_version = models.CharField(max_length=64, blank=True)
    document = models.JSONField()
    author = models.CharField(max_length=150, blank=True)
    origin = models.CharField(max_length=20, default="api")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return self.version[:12]
