"""Agent sessions, turns and the canonical timeline (seed 000)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from amux_common.bounds import JsonBytes
from amux_common.secrets import EncryptedJSONField
from runtimes.catalog import names, provider_catalog
from sessions import limits as bounds


class ProviderProfile(models.Model):
    """A model provider: where a runtime sends its model requests, with which key."""

    PLATFORMS = [("openai-compat", "OpenAI-compatible (Responses / Chat Completions)"),
                 ("anthropic-compat", "Anthropic-compatible (Messages)")]

    slug = models.SlugField(max_length=60, unique=True)
    platform = models.CharField(max_length=30, choices=PLATFORMS,
                                help_text="openai-compat, anthropic-compat")
    base_url = models.URLField(max_length=300)
    secrets = EncryptedJSONField(default=dict, blank=True, editable=False)
    model_names = models.JSONField(default=list, blank=True,
                                   validators=[JsonBytes(bounds.PROVIDER_MODELS_BYTES)],
                                   help_text="suggested models: names or {name, display_name?, "
                                             "efforts?} (runtimes.catalog)")
    watchdog = models.JSONField(default=dict, blank=True,
                                validators=[JsonBytes(bounds.WATCHDOG_BYTES)],
                                help_text="watchdog limits for sessions on this provider "
                                          "(runtimes.watchdog.LIMITS)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.slug

    @property
    def model_list(self) -> list[str]:
        """The model names of ``model_names`` (whose entries may carry display names)."""
        return names(self.model_names)


class ProviderProbe(models.Model):
    """One explicit probe of a provider's route (``GET <base_url>/models``): versioned
    evidence of the models it lists and what it advertises about them (sessions.capabilities).
    A field a route does not advertise is absent: unknown, never guessed. Holds no key and
    no raw response body."""

    OUTCOMES = [("ok", "ok"), ("not_authenticated", "not authenticated"),
                ("unreachable", "unreachable"), ("not_a_model_list", "not a model list"),
                ("http_error", "HTTP error"), ("key_unusable", "key unusable"),
                ("paging_failed", "paging failed")]

    provider = models.ForeignKey(ProviderProfile, on_delete=models.CASCADE,
                                 related_name="probes")
    revision = models.PositiveIntegerField(help_text="1, 2, … per provider")
    probed_at = models.DateTimeField()
    platform = models.CharField(max_length=30, help_text="the route probed")
    base_url = models.CharField(max_length=300)
    ok = models.BooleanField(default=False)
    outcome = models.CharField(max_length=20, choices=OUTCOMES)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    listed_models = models.JSONField(default=list, blank=True,
                                     help_text="[{id, advertised fields when present}]")
    digest = models.CharField(max_length=64, help_text="sha256 of the normalised snapshot")
    detail = models.CharField(max_length=300, blank=True, help_text="redacted health detail")

    class Meta:
        ordering = ["provider", "-revision"]
        constraints = [models.UniqueConstraint(fields=["provider", "revision"],
                                               name="provider_probe_revision_unique")]

    def __str__(self):
        return f"{self.provider_id}@{self.revision}"

    @property
    def model_ids(self) -> list[str]:
        return [m["id"] for m in self.listed_models if isinstance(m, dict) and "id" in m]


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
    # its model requests pass amux's model gateway, which counts their usage per request
    # (sessions/model_credentials.py): the runtime's own reports are then not added again
    usage_metered = models.BooleanField(default=False)
    lease_owner = models.CharField(max_length=120, blank=True)
    lease_host = models.CharField(max_length=120, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    runtime_env = EncryptedJSONField(default=dict, blank=True, editable=False,
                                     help_text="extra runtime environment (e.g. a scoped "
                                               "tool token), encrypted")
    runtime_tag = models.CharField(max_length=64, blank=True,
                                   help_text="marks the runtime processes of the current host")
    last_active_at = models.DateTimeField(null=True, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+",
                              help_text="the API caller that started it (MCP session_run, "
                                        "a schedule); none for operator sessions")
    runtime_facts = models.JSONField(
        default=dict, blank=True,
        help_text="what the running agent declared (image input, advertised commands), as "
                  "its host last saw it; checked before a control or an image is accepted")
    mirrored = models.BooleanField(
        default=False,
        help_text="another place shows its turns (a Lark conversation): the timeline tells "
                  "sessions.hooks.timeline_mirrored of each event")
    has_task_runs = models.BooleanField(
        default=False,
        help_text="task runs follow its turns (sessions/task_runs.py): the timeline starts a "
                  "run with its turn, and the turn's end reaches them; set when the first "
                  "run is submitted, so the timeline reads it with the session's own row")
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

    @property
    def model_display_name(self) -> str:
        """The model's display name in its provider's catalog, the ref otherwise."""
        entry = provider_catalog(self.provider.model_names if self.provider_id else None
                                 ).find(self.model)
        return entry.display_name if entry and entry.display_name else self.model


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
    origin = models.JSONField(
        default=dict, blank=True,
        help_text='where the input came from: {"via": "web" | "lark" | "api" | …, "actor", …}')
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


class ModelCredential(models.Model):
    """The key a session's runtime presents to amux's model gateway in place of the
    provider's (sessions/model_credentials.py). Only its hash is kept; a new one is issued
    at each runtime launch, and it is revoked (hash cleared) when the session is archived
    or its ticket's assignment ends."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE,
                                   related_name="model_credential")
    token_hash = models.CharField(max_length=64, null=True, unique=True, editable=False)
    issued_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)


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


class MemoryEntry(models.Model):
    """One piece of long-term memory, owned by one user (seed 000 按需系统记忆): it stays
    in amux, and only an explicit ``memory_read`` brings it into a session."""

    owner = models.ForeignKey("auth.User", on_delete=models.CASCADE,
                              related_name="memory_entries")
    title = models.CharField(max_length=bounds.MEMORY_TITLE)
    text = models.TextField(max_length=bounds.MEMORY_TEXT)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["owner", "-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="memory_by_owner")]


class WatchdogSettings(models.Model):
    """The global watchdog limits (one row): what a session gets when neither it nor its
    provider names a limit (runtimes.watchdog.resolve)."""

    limits = models.JSONField(default=dict, blank=True,
                              validators=[JsonBytes(bounds.WATCHDOG_BYTES)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "watchdog settings"

    @classmethod
    def current(cls) -> WatchdogSettings:
        settings, _ = cls.objects.get_or_create(pk=1)
        return settings


class SessionGoal(models.Model):
    """The session's native goal as amux authorizes it (seed 000, 原生目标).

    One row per session, written by ``sessions.native_goals``: a command changes the authorization
    in the same transaction that sends it to the host; the host writes what the runtime
    answers (``snapshot``, ``native_thread``). A native continuation is admitted only while
    ``authorized`` holds, ``native_thread`` is the running thread and ``objective`` is the
    native objective. ``goal_key`` names this goal (new on create and replace): a card of
    another key controls nothing. ``location`` is the origin of the message that created
    (or replaced) it, where its output goes; ``generation`` grows with each replace/clear."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="goal")
    goal_key = models.CharField(max_length=40, blank=True)
    objective = models.TextField(blank=True)
    authorized = models.BooleanField(default=False)
    # ordinary input paused the native goal: the host resumes it once the queue is empty
    preempted = models.BooleanField(default=False)
    location = models.JSONField(null=True, blank=True)
    generation = models.PositiveIntegerField(default=0)
    native_thread = models.CharField(max_length=300, blank=True)
    snapshot = models.JSONField(null=True, blank=True,
                                help_text="the native goal as the runtime last reported it")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"goal of session {self.session_id}: {self.objective[:40]}"


class AppServer(models.Model):
    """An attachable Codex app-server on this host (sessions/app_servers.py): one amux
    started on the operator's request (``spawned``: amux knows its process) or one the
    operator registered by URL and token (``registered``). Its threads are the attachable
    sessions; what a public descriptor shows is bounded (no token, URL or local path)."""

    ref = models.CharField(max_length=32, unique=True, help_text="public-safe reference")
    name = models.CharField(max_length=120, blank=True)
    origin = models.CharField(max_length=12, choices=[("spawned", "spawned"),
                                                      ("registered", "registered")])
    url = models.CharField(max_length=300, help_text="owner-local: ws://host:port")
    secrets = EncryptedJSONField(blank=True, default=dict)  # {"token"}
    provider = models.ForeignKey(ProviderProfile, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=120, blank=True)
    workspace = models.CharField(max_length=1000, blank=True,
                                 help_text="owner-local: the work directory of its threads")
    # the goal and agent it was started or registered for, when known (slugs: goals is a
    # layer above sessions)
    goal = models.CharField(max_length=60, blank=True)
    agent = models.CharField(max_length=60, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)  # spawned only
    # a spawned app-server calls its provider through amux's model gateway with this
    # credential (only its hash kept; cleared when stopped), never with the provider's key
    model_token_hash = models.CharField(max_length=64, null=True, unique=True, editable=False)
    state_dir = models.CharField(max_length=1000, blank=True)
    # live | lost (did not answer when last checked) | stopped (by the operator)
    state = models.CharField(max_length=10, default="live")
    checked_at = models.DateTimeField(null=True, blank=True)
    last_live_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"app-server {self.ref} ({self.origin}, {self.state})"


class RuntimeIdentity(models.Model):
    """A user of the runtime pool (``<AMUX_RUNTIME_POOL>-<slot>``) leased to one session
    from its first launch under linux-dac or bwrap until it is archived: its runtime, its
    commands and its goal checks run as this uid, its work directory is this user's
    group's alone (``sessions.identities``)."""

    slot = models.PositiveIntegerField(primary_key=True)
    # none while a runtime worker's warm pool holds the slot for a pre-started runtime
    # (``holder``: that worker's ``<host>:<pid>``); the session that takes the process
    # takes the slot (sessions/warm_pool.py)
    session = models.OneToOneField(Session, on_delete=models.CASCADE, null=True, blank=True,
                                   related_name="runtime_identity")
    holder = models.CharField(max_length=200, blank=True, default="")
    user = models.CharField(max_length=32)
    uid = models.PositiveIntegerField()
    leased_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slot"]

    def __str__(self):
        return f"{self.user} (uid {self.uid}) → " + (
            f"session {self.session_id}" if self.session_id else f"warm pool {self.holder}")
