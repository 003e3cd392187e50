"""The orchestrator's records (seed 002): evals, tickets, mandates, subscriptions,
assignments and what flows through them. Sources, threads, triggers and channels are
intake's (intake/models.py): tickets consume them.

Only tickets/actions/ writes ticket-domain state. Stage is derived (tickets/core/stage.py),
never stored. Every table that a pass over live work reads has a partial index on its live
rows, so a pass costs the same whatever the size of history.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from amux_common.bounds import JsonBytes
from intake.models import Channel, Strength, Thread, Trigger
from tickets import limits as bounds


class EvalState(models.TextChoices):
    RUNNING = "running", "running"
    DONE = "done", "done"
    DISCARDED = "discarded", "discarded"


class EvalResult(models.TextChoices):
    ACCEPT = "accept", "accept"
    DECLINE = "decline", "decline"
    NEEDS_PERSON = "needs_person", "needs a person"


class Eval(models.Model):
    """Triage of an inferred candidate under one policy version."""

    trigger = models.ForeignKey(Trigger, on_delete=models.PROTECT, related_name="evals")
    policy_version = models.CharField(max_length=64)
    state = models.CharField(max_length=10, choices=EvalState.choices, default="running")
    result = models.CharField(max_length=20, choices=EvalResult.choices, blank=True)
    note = models.CharField(max_length=300, blank=True, help_text="Routing note, ≤ 30 words")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["id"], name="eval_running", condition=Q(state="running"))
        ]


class Ticket(models.Model):
    """Accepted work. Its stage is derived from the facts below, never stored."""

    short_name = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=300)
    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="tickets")
    channel = models.ForeignKey(
        Channel, null=True, blank=True, on_delete=models.PROTECT, related_name="tickets"
    )
    session = models.ForeignKey(
        "agent_sessions.Session",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tickets",
    )
    pr_url = models.URLField(max_length=500, blank=True)
    pr_state = models.CharField(max_length=10, blank=True, help_text="open, merged or closed")
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=40, blank=True)
    # What was spent when an operator pressed Retry on a ticket a cap blocked: its caps
    # count from there (tickets/core/guards.py Waiver).
    guard_waiver = models.JSONField(default=dict, blank=True, editable=False)
    # Who routed the request (tickets/core/main_session.py: the main session or amux's
    # code) and the main session's routing note: where to look, at most 30 words.
    routed_by = models.CharField(max_length=10, blank=True)
    routing_note = models.CharField(max_length=400, blank=True)
    stop_note = models.CharField(max_length=340, blank=True,
                                 help_text="who stopped the ticket and why (the main session)")

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["id"], name="ticket_live", condition=Q(ended_at__isnull=True))
        ]

    def __str__(self):
        return self.short_name


class ImmutableError(ValidationError):
    pass


class ImmutableQuerySet(models.QuerySet):
    """Bulk updates and deletes are refused like single ones."""

    def update(self, **kwargs):
        raise ImmutableError(f"{self.model._meta.verbose_name} rows cannot be changed")

    def delete(self):
        raise ImmutableError(f"{self.model._meta.verbose_name} rows cannot be deleted")


class Mandate(models.Model):
    """What was allowed when the ticket was opened. Written once, never changed.

    The database refuses UPDATE and DELETE too (migration 0002), so no code path can
    rewrite history.
    """

    ticket = models.OneToOneField(Ticket, on_delete=models.PROTECT, related_name="mandate")
    trigger = models.ForeignKey(
        Trigger, null=True, blank=True, on_delete=models.PROTECT, related_name="mandates"
    )
    policy_version = models.CharField(max_length=64)
    scope = models.CharField(max_length=40)
    strength = models.CharField(max_length=10, choices=Strength.choices)
    rule = models.CharField(max_length=120, blank=True)
    requester = models.CharField(max_length=200)
    basis = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ImmutableQuerySet.as_manager()

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ImmutableError("a mandate cannot be changed once written")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ImmutableError("a mandate cannot be deleted")


class Subscription(models.Model):
    """A thread's follow-ups flow to this ticket (path B); it outlives the ticket's end."""

    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="subscriptions")
    thread = models.OneToOneField(Thread, on_delete=models.PROTECT, related_name="subscription")
    created_at = models.DateTimeField(auto_now_add=True)


class AssignmentState(models.TextChoices):
    DISPATCHING = "dispatching", "dispatching"
    RUNNING = "running", "running"
    ENDED = "ended", "ended"
    FAILED = "failed", "failed"


LIVE_ASSIGNMENT = Q(state__in=["dispatching", "running"])


class Assignment(models.Model):
    """One run of the ticket's worker session."""

    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="assignments")
    state = models.CharField(
        max_length=12, choices=AssignmentState.choices, default="dispatching"
    )
    token_hash = models.CharField(max_length=64, blank=True, editable=False)
    attempt = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=60, blank=True)
    # A failed run keeps why, whole (tickets/core/failure.py): shown on the ticket page
    # and in the API as `failure`.
    failure_code = models.CharField(max_length=60, blank=True)
    failure_message = models.TextField(blank=True)
    held = models.CharField(max_length=200, blank=True,
                            help_text="why a cap keeps the run from starting for now")
    last_turn_at = models.DateTimeField(
        null=True, blank=True, help_text="when the worker last finished a turn"
    )

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["ticket"], name="assignment_live", condition=LIVE_ASSIGNMENT)
        ]


class InputKind(models.TextChoices):
    MESSAGE = "message", "message"
    ANSWER = "answer", "answer to a question"
    POLICY = "policy", "policy change"
    OPERATOR = "operator", "operator"


class Input(models.Model):
    """Something for the executor to read; delivered through the outbox (`deliver`)."""

    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="inputs")
    kind = models.CharField(max_length=10, choices=InputKind.choices, default="message")
    text = models.TextField()
    author = models.CharField(max_length=200, blank=True)
    is_human = models.BooleanField(default=True)
    trigger = models.ForeignKey(
        Trigger, null=True, blank=True, on_delete=models.PROTECT, related_name="inputs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    failure = models.TextField(blank=True)
    held = models.CharField(max_length=200, blank=True,
                            help_text="why a cap keeps it from the worker for now")

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["ticket"], name="input_undelivered", condition=Q(delivered_at__isnull=True)
            )
        ]


class ReportStatus(models.TextChoices):
    PROGRESS = "progress", "progress"
    DONE = "done", "done"
    BLOCKED = "blocked", "blocked"
    FAILED = "failed", "failed"


class Report(models.Model):
    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="reports")
    assignment = models.ForeignKey(
        Assignment, null=True, blank=True, on_delete=models.PROTECT, related_name="reports"
    )
    status = models.CharField(max_length=10, choices=ReportStatus.choices)
    text = models.TextField(blank=True, max_length=bounds.REPORT_TEXT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class Question(models.Model):
    """A structured `ask` (the attention object). Only this makes a ticket wait for a person."""

    ticket = models.ForeignKey(Ticket, on_delete=models.PROTECT, related_name="questions")
    text = models.TextField(max_length=bounds.QUESTION)
    options = models.JSONField(default=list, blank=True,
                               validators=[JsonBytes(bounds.QUESTION_OPTIONS_BYTES)])
    multi = models.BooleanField(default=False)
    message_ref = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    answer = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["ticket"], name="question_open", condition=Q(answered_at__isnull=True)
            )
        ]


class AgentSettings(models.Model):
    """Who does the work: the model that triages candidates and the runtime, provider and
    model of each ticket's worker session. One row (pk 1), edited in the panel or the API."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    triage_provider = models.ForeignKey(
        "agent_sessions.ProviderProfile",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    triage_model = models.CharField(max_length=120, blank=True)
    worker_runtime = models.CharField(max_length=20, default="codex")
    worker_provider = models.ForeignKey(
        "agent_sessions.ProviderProfile",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    worker_model = models.CharField(max_length=120, blank=True)
    # The team's main session (seed 002): with a runtime, provider and model it routes
    # explicit requests and hears follow-ups; empty, amux routes them by code.
    main_runtime = models.CharField(max_length=20, blank=True)
    main_provider = models.ForeignKey(
        "agent_sessions.ProviderProfile",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    main_model = models.CharField(max_length=120, blank=True)
    # Guards (tickets/core/guards.py); 0 means no cap.
    ticket_token_cap = models.PositiveBigIntegerField(
        default=2_000_000, help_text="tokens one ticket's worker may spend (0: no cap)")
    daily_token_cap = models.PositiveBigIntegerField(
        default=20_000_000, help_text="tokens all sessions may spend per UTC day (0: no cap)")
    messages_per_ticket_hour = models.PositiveIntegerField(
        default=20, help_text="messages amux sends for one ticket per hour (0: no cap)")
    # Command names whose worker shim fails (tickets/tools/worker_bin.py), sorted.
    disabled_commands = models.JSONField(
        default=list, blank=True,
        help_text="commands a worker may not run: each fails naming this setting")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "agent settings"

    @classmethod
    def current(cls) -> AgentSettings:
        settings, _ = cls.objects.get_or_create(pk=1)
        return settings


class MainSession(models.Model):
    """The team's one main session (pk 1): its runtime session and the hash of the bearer
    token its amux tools carry (route, dismiss, stop). A new session gets a new token."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+")
    token_hash = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)


class TicketMessage(models.Model):
    """A message amux sends on a ticket's behalf (a relay to its thread, a notice), counted
    against the hourly message cap. Released ones went to the outbox at `released_at`; a
    held one waits, payload and all, and goes out in order when the hour rolls over, the
    cap is raised or an operator presses Retry."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="messages")
    kind = models.CharField(max_length=10, choices=[("relay", "relay"), ("notice", "notice")])
    key = models.CharField(max_length=300)
    channel = models.CharField(max_length=300, blank=True)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["ticket", "released_at"], name="ticket_message_window"),
            models.Index(fields=["ticket", "id"], name="ticket_message_held",
                         condition=Q(released_at__isnull=True)),
        ]
