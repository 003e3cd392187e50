"""Agent sessions, turns and the canonical timeline (seed 000)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from amux_common.secrets import EncryptedJSONField


class ProviderProfile(models.Model):
    """A model provider: where a runtime sends its model requests, with which key."""

    PLATFORMS = [("openai-compat", "OpenAI-compatible (Responses / Chat Completions)"),
                 ("anthropic-compat", "Anthropic-compatible (Messages)")]

    slug = models.SlugField(max_length=60, unique=True)
    platform = models.CharField(max_length=30, choices=PLATFORMS,
                                help_text="openai-compat, anthropic-compat")
    base_url = models.URLField(max_length=300)
    secrets = EncryptedJSONField(default=dict, blank=True, editable=False)
    model_names = models.JSONField(default=list, blank=True, help_text="suggested models")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.slug


class Lifecycle(models.TextChoices):
    CREATED = "created", "created"
    RUNNING = "running", "running"
    IDLE = "idle", "idle"
    SLEEPING = "sleeping", "sleeping"
    ARCHIVED = "archived", "archived"


class SleepReason(models.TextChoices):
    MANUAL = "manual", "manual"
    IDLE_TIMEOUT = "idle_timeout", "idle timeout"
    RESTART_FAILED = "restart_failed", "restart failed"


class Session(models.Model):
    """One conversation with one agent runtime, made of turns."""

    name = models.CharField(max_length=120, blank=True)
    runtime = models.CharField(max_length=20)
    provider = models.ForeignKey(
        ProviderProfile, null=True, blank=True, on_delete=models.PROTECT, related_name="sessions"
    )
    model = models.CharField(max_length=120, blank=True)
    snapshot = models.JSONField(default=dict, blank=True, help_text="execution settings, frozen")
    workdir = models.CharField(max_length=500)
    native_ref = models.CharField(max_length=300, blank=True)
    lifecycle = models.CharField(max_length=10, choices=Lifecycle.choices, default="created")
    sleep_reason = models.CharField(max_length=20, choices=SleepReason.choices, blank=True)
    idle_timeout_s = models.PositiveIntegerField(default=300)
    usage = models.JSONField(default=dict, blank=True)
    lease_owner = models.CharField(max_length=120, blank=True)
    lease_host = models.CharField(max_length=120, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    runtime_env = EncryptedJSONField(default=dict, blank=True, editable=False,
                                     help_text="extra runtime environment (e.g. a scoped "
                                               "tool token), encrypted")
    runtime_tag = models.CharField(max_length=64, blank=True,
                                   help_text="marks the runtime processes of the current host")
    last_active_at = models.DateTimeField(null=True, blank=True)
    runtime_facts = models.JSONField(
        default=dict, blank=True,
        help_text="what the running agent declared (image input, advertised commands), as "
                  "its host last saw it; checked before a control or an image is accepted")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(
                fields=["lease_expires_at"],
                name="session_awake",
                condition=Q(lifecycle__in=["running", "idle"]),
            )
        ]

    def __str__(self):
        return self.name or f"session {self.pk}"


class TurnState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class Turn(models.Model):
    """One user input and the agent's work on it; exactly one terminal event."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    seq = models.PositiveIntegerField()
    key = models.CharField(max_length=120, help_text="idempotency key")
    input = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=10, choices=TurnState.choices, default="queued")
    error_code = models.CharField(max_length=60, blank=True)
    prompt_revisions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="turn_unique_seq"),
            models.UniqueConstraint(fields=["session", "key"], name="turn_unique_key"),
        ]
        indexes = [
            models.Index(
                fields=["session", "seq"],
                name="turn_open",
                condition=Q(state__in=["queued", "running"]),
            )
        ]


class TimelineEvent(models.Model):
    """A canonical timeline event, numbered per session (sessions/timeline.py)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    turn = models.ForeignKey(
        Turn, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    type = models.CharField(max_length=40)
    payload = models.JSONField(default=dict, blank=True)
    provenance = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="event_unique_seq")
        ]


class UsageDay(models.Model):
    """Tokens a session spent within one UTC day, added up from its usage reports
    (sessions/usage.py); the daily spend cap of tickets sums these over sessions."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="usage_days")
    day = models.DateField()
    tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["session", "day"]
        constraints = [
            models.UniqueConstraint(fields=["session", "day"], name="usage_day_unique")
        ]
        indexes = [models.Index(fields=["day"], name="usage_day_by_day")]
