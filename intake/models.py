"""Intake's records: where events come from (Source), what arrived (Delivery), the
conversations they belong to (Thread), the events the gate looked at (Trigger), where
replies go (Channel) and the replies amux keeps itself (OutgoingMessage).

Intake writes them (intake/process.py and friends); consumers — tickets today,
conversations and connectors next — read them and point at them.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from amux_common.bounds import json_bounds
from amux_common.secrets import EncryptedJSONField
from intake import limits


class SourceKind(models.TextChoices):
    GITHUB = "github", "GitHub"
    LARK = "lark", "Lark"
    WEBCHAT = "webchat", "Web chat"


class Source(models.Model):
    """Where events come from and replies go; a plugin of intake/sources/<kind>.py."""

    kind = models.CharField(max_length=20, choices=SourceKind.choices)
    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=120)
    enabled = models.BooleanField(default=True)
    config = models.JSONField(default=dict, blank=True,
                              validators=json_bounds(limits.CONFIG_KEYS, limits.CONFIG_BYTES))
    secrets = EncryptedJSONField(default=dict, blank=True, editable=False)
    health = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return f"{self.kind}:{self.slug}"


class Delivery(models.Model):
    """One verified webhook delivery, stored raw before any processing (intake)."""

    # no index of its own: the unique constraint below leads with source
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="deliveries",
                               db_index=False)
    delivery_id = models.CharField(max_length=200)
    event = models.CharField(max_length=100, blank=True)
    mailbox = models.CharField(max_length=400, blank=True, help_text="<source>:<thread>")
    headers = models.JSONField(default=dict, blank=True)
    body = models.BinaryField()
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=40, blank=True)
    reason = models.CharField(max_length=80, blank=True)
    trigger = models.ForeignKey(
        "Trigger", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A plugin or the gate failed on it: it stays unprocessed (and holds back its mailbox)
    # with the error until its mailbox's retry, an outbox effect, processes it
    # (intake/record.py); the error stays once it is processed.
    last_error = models.TextField(blank=True, editable=False)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["source", "delivery_id"], name="delivery_unique_id")
        ]
        indexes = [
            models.Index(
                fields=["mailbox", "id"],
                name="delivery_unprocessed",
                condition=Q(processed_at__isnull=True),
            )
        ]


class Thread(models.Model):
    """One conversation in a source: an issue or PR, a Lark thread or chat."""

    # no index of its own: the unique constraint below leads with source
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="threads",
                               db_index=False)
    key = models.CharField(max_length=300)
    title = models.CharField(max_length=300, blank=True)
    url = models.URLField(max_length=500, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "key"], name="thread_unique_key")
        ]

    def __str__(self):
        return f"{self.source.slug}:{self.key}"


class Decision(models.TextChoices):
    EXPLICIT = "explicit", "explicit request"
    INFERRED = "inferred", "inferred candidate"
    IGNORE = "ignore", "ignored"


class Strength(models.TextChoices):
    EXPLICIT = "explicit", "explicit"
    INFERRED = "inferred", "inferred"


class Trigger(models.Model):
    """One event the policy looked at, with the gate's decision and one content-free reason."""

    # no index of its own: the unique constraint below leads with source
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="triggers",
                               db_index=False)
    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="triggers")
    external_id = models.CharField(max_length=300)
    scope = models.CharField(max_length=40)
    actor = models.CharField(max_length=200, blank=True)
    is_human = models.BooleanField(default=True)
    is_bot = models.BooleanField(default=False)
    addressed = models.BooleanField(default=False)
    receives_all = models.BooleanField(default=False)
    text = models.TextField(blank=True)
    meta = models.JSONField(default=dict, blank=True)
    decision = models.CharField(max_length=10, choices=Decision.choices, blank=True)
    strength = models.CharField(max_length=10, choices=Strength.choices, blank=True)
    rule = models.CharField(max_length=120, blank=True)
    reason = models.CharField(max_length=80, blank=True)
    policy_version = models.CharField(max_length=64, blank=True)
    disposition = models.CharField(
        max_length=20,
        blank=True,
        help_text="What became of it: admitted, ignored, subscribed, evaluating, handed_back…",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "external_id"], name="trigger_unique_id")
        ]


class ChannelKind(models.TextChoices):
    THREAD = "thread", "source thread"
    CHAT = "chat", "chat"


class Channel(models.Model):
    """Where notices and relayed reports go."""

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="channels")
    kind = models.CharField(max_length=10, choices=ChannelKind.choices, default="thread")
    address = models.CharField(max_length=300)
    name = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "address"], name="channel_unique_address")
        ]

    def __str__(self):
        return f"{self.source.slug}:{self.address}"


class OutgoingMessage(models.Model):
    """A reply kept by amux itself (web chat), once per message id."""

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="outgoing")
    thread_key = models.CharField(max_length=300)
    message_id = models.CharField(max_length=200)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "message_id"], name="outgoing_unique_message"
            )
        ]




class EventAck(models.Model):
    """One event of a source with a cursor (a Lark document's comments), from capture until
    it is acknowledged: the cursor passes it only once its durable effect is recorded (its
    delivery processed into a trigger, or ignored with a reason) and, when a reply is due,
    the reply was sent and read back from the provider (intake/acks.py)."""

    class State(models.TextChoices):
        CAPTURED = "captured", "captured"  # stored; its effect not recorded yet
        REPLYING = "replying", "reply due"  # effect recorded; reply not verified yet
        # handed to a consumer that acknowledges it itself (a goal agent's async inbox):
        # waits for that consumer's ACK (its durable effect and verified reply)
        HELD = "held", "held by its consumer"
        ACKED = "acked", "acknowledged"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="acks",
                               db_index=False)
    cursor = models.CharField(max_length=200,
                              help_text="the cursor's name, e.g. doc:<type>:<token>")
    item = models.CharField(max_length=200, help_text="the provider's id of the event")
    at = models.BigIntegerField(help_text="the provider's create time (s), the cursor's order")
    order = models.CharField(max_length=400, help_text="ties within one second")
    delivery_id = models.CharField(max_length=200)
    state = models.CharField(max_length=10, choices=State.choices, default=State.CAPTURED)
    # content-free: replied (read back), no_response (nothing due), ignored reason…
    outcome = models.CharField(max_length=40, blank=True)
    reply_ref = models.CharField(max_length=200, blank=True,
                                 help_text="the reply as read back from the provider")
    created_at = models.DateTimeField(auto_now_add=True)
    acked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["at", "order"]
        constraints = [
            models.UniqueConstraint(fields=["source", "cursor", "item"],
                                    name="event_ack_unique_item")
        ]



class GitHubAppSetup(models.Model):
    """One "Create a GitHub App" from the Sources tab, from the form until the app exists
    (intake/github_app.py). `state` is handed to GitHub and comes back with the code: it
    is used once, before `expires_at`. The app's credentials are never kept here: they
    go straight into the source's encrypted secrets."""

    class Status(models.TextChoices):
        PENDING = "pending", "sent to GitHub"
        EXCHANGING = "exchanging", "exchanging the code"
        CREATED = "created", "app created"
        FAILED = "failed", "failed"

    state = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    created_by = models.ForeignKey("auth.User", null=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    web_url = models.URLField(max_length=300)
    api_url = models.URLField(max_length=300)
    owner = models.CharField(max_length=12)  # personal | organization
    org = models.CharField(max_length=100, blank=True)
    slug = models.SlugField(max_length=60, help_text="the source it creates")
    name = models.CharField(max_length=120)
    repos = models.JSONField(default=list)
    manifest = models.JSONField(default=dict)
    # what GitHub answered, once the code was exchanged (the app, not its secrets)
    app_id = models.BigIntegerField(null=True, blank=True)
    app_slug = models.CharField(max_length=100, blank=True)
    html_url = models.URLField(max_length=300, blank=True)
    source = models.ForeignKey(Source, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-id"]
