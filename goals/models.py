"""Goals worked by agents (seed 003): goal → todos, materials, agents; each agent has at most
one active working session; connectors bind an external source to one agent; one ingress
receipt per event; queued items and inbox events are owner-local. goals/actions.py and
goals/ingress.py are the only writers."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from goals import limits
from goals.core import connectors as ck
from goals.core import inbox as inbox_rules
from goals.core import lifecycle as lc
from goals.core import turns as turn_rules


def _choices(values):
    return [(v, v) for v in values]


class Goal(models.Model):
    slug = models.SlugField(max_length=60, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True, max_length=limits.GOAL_DESCRIPTION)
    state = models.CharField(max_length=12, choices=_choices(lc.GOAL_STATES), default="active")
    check_command = models.CharField(
        max_length=2000, blank=True,
        help_text="the independent validation amux runs in the workspace after a turn")
    quota_unit = models.CharField(max_length=8, default="turns")
    quota_limit = models.PositiveIntegerField(default=0)
    quota_spent = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.slug


class Agent(models.Model):
    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="agents")
    slug = models.SlugField(max_length=60)
    name = models.CharField(max_length=120, blank=True)
    mode = models.CharField(max_length=24, choices=_choices(lc.MODES))
    lifecycle = models.CharField(max_length=12, choices=_choices(lc.LIFECYCLES),
                                 default="terminal")
    # managed mode's launch settings (an attached session brings its own)
    runtime = models.CharField(max_length=40, default="pi")
    provider = models.ForeignKey("agent_sessions.ProviderProfile", null=True, blank=True,
                                 on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=120, blank=True)
    # the supervisor starts the next bounded turn by itself after a "continue" (goals/tasks)
    autorun = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["goal", "slug"]
        constraints = [models.UniqueConstraint(fields=["goal", "slug"],
                                               name="goal_agent_unique_slug")]

    def __str__(self):
        return f"{self.goal.slug}/{self.slug}"


class WorkingSession(models.Model):
    """An agent's binding to one session. ``active`` ends on detach; the row stays as the
    record of which session the agent worked in."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="bindings")
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.PROTECT,
                                related_name="goal_bindings")
    mode = models.CharField(max_length=24, choices=_choices(lc.MODES))
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    token_digest = models.CharField(
        max_length=64, blank=True, db_index=True,
        help_text="sha256 of the agent's own token (attached agents): valid while active")

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["agent"], condition=Q(active=True),
                                    name="one_active_session_per_agent"),
            models.UniqueConstraint(fields=["session"], condition=Q(active=True),
                                    name="one_agent_per_active_session"),
        ]


class Todo(models.Model):
    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="todos")
    title = models.CharField(max_length=300)
    state = models.CharField(max_length=10, choices=_choices(lc.TODO_STATES), default="open")
    evidence = models.TextField(blank=True, max_length=limits.TODO_EVIDENCE)
    claimed_by = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="claims")
    # an attached agent's "done" on its way through amux's check (goals/writeback.py)
    writeback = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["goal", "id"]


class Material(models.Model):
    """A registered document body: authority material with a revision and freshness. Its
    comment stream, if any, is a separate connector with its own cursor."""

    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="materials")
    key = models.CharField(max_length=120)
    title = models.CharField(max_length=200, blank=True)
    body = models.TextField(blank=True, max_length=limits.MATERIAL_BODY)
    source_ref = models.CharField(max_length=200, blank=True,
                                  help_text="owner-local: the document it was fetched from")
    revision = models.PositiveIntegerField(default=1)
    fetched_at = models.DateTimeField()
    max_age_s = models.PositiveIntegerField(default=86400)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["goal", "key"]
        constraints = [models.UniqueConstraint(fields=["goal", "key"],
                                               name="goal_material_unique_key")]


class Connector(models.Model):
    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="connectors")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="connectors")
    provider_kind = models.CharField(max_length=20)
    source_kind = models.CharField(max_length=30, choices=_choices(ck.SOURCE_KINDS))
    source = models.ForeignKey("intake.Source", null=True, blank=True,
                               on_delete=models.PROTECT, related_name="goal_connectors")
    source_ref = models.CharField(max_length=200, blank=True,
                                  help_text="owner-local: chat id or document token")
    mirror_ref = models.CharField(
        max_length=200, blank=True,
        help_text="owner-local: where a configured_mirror reply goes (a configured chat id)")
    capture_scope = models.CharField(max_length=24, choices=_choices(ck.CAPTURE_SCOPES),
                                     default="mentions")
    ingress_mode = models.CharField(max_length=16, choices=_choices(ck.INGRESS_MODES))
    fallback = models.CharField(max_length=16, choices=_choices(ck.FALLBACKS), default="none")
    reply_mode = models.CharField(max_length=20, choices=_choices(ck.REPLY_MODES),
                                  default="none")
    state = models.CharField(max_length=14, choices=_choices(ck.STATES), default="connected")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent"],
                condition=Q(source_kind=ck.LARK_BOT) & ~Q(state="disconnected"),
                name="one_lark_bot_per_agent"),
        ]


class IngressReceipt(models.Model):
    """One per event and connector: content-free (no text, author or place)."""

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="receipts")
    dedupe_key = models.CharField(max_length=200)
    event_kind = models.CharField(max_length=10)
    selected_mode = models.CharField(max_length=16, blank=True)
    fallback_used = models.BooleanField(default=False)
    outcome = models.CharField(max_length=12)
    reason = models.CharField(max_length=40, blank=True)
    session = models.ForeignKey("agent_sessions.Session", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    turn_key = models.CharField(max_length=120, blank=True)
    origin = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["connector", "dedupe_key"],
                                               name="one_receipt_per_event")]


class QueuedIngress(models.Model):
    """An item of an agent session's ordered ingress queue (not a LoopX todo)."""

    receipt = models.OneToOneField(IngressReceipt, on_delete=models.CASCADE,
                                   related_name="queued")
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE,
                                related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    text = models.TextField()
    # queued, delivered, cancelled, expired or dead
    state = models.CharField(max_length=10, default="queued")
    queued_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "id"], condition=Q(state="queued"),
                                name="goal_queue_head")]


class InboxEvent(models.Model):
    """An owner-private async_inbox event: its body, author and place stay here."""

    receipt = models.OneToOneField(IngressReceipt, on_delete=models.CASCADE,
                                   related_name="inboxed")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="inbox")
    kind = models.CharField(max_length=10)
    text = models.TextField(blank=True)
    actor = models.CharField(max_length=200, blank=True)
    thread = models.CharField(max_length=200, blank=True)
    place = models.CharField(max_length=200, blank=True)
    received_at = models.DateTimeField()
    # pending → processing (drained: a claim until `claimed_until`) → replying (settled:
    # its effect recorded, the reply not read back yet) → acked (goals/inbox.py)
    state = models.CharField(max_length=10, default="pending")
    claim_key = models.CharField(max_length=120, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    drains = models.PositiveIntegerField(default=0)
    # content-free, once acked: replied | no_response | reply_gone
    outcome = models.CharField(max_length=20, blank=True)
    acked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["agent", "state"], name="goal_inbox_open",
                                condition=~Q(state="acked"))]


class GoalTurn(models.Model):
    """One loopx_turn_v0 envelope (goals/turns.py): idempotent on (agent, key); ``state``
    names the last step whose effect is committed, so a replay resumes after it."""

    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="turns")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="turns")
    key = models.CharField(max_length=100)
    todo = models.ForeignKey(Todo, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="turns")
    session = models.ForeignKey("agent_sessions.Session", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    session_turn = models.ForeignKey("agent_sessions.Turn", null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=10, choices=_choices(turn_rules.STATES))
    reason = models.CharField(max_length=40, blank=True)
    # {"turn_state", "error_code", "tokens", "interrupted"}: the session turn's outcome
    attempt = models.JSONField(default=dict, blank=True)
    # {"passed", "output", "exit_code", "timed_out"}: amux's own check, never the agent's
    validation = models.JSONField(default=dict, blank=True)
    # {"accepted", "todo", "todo_state", "reason"}
    writeback = models.JSONField(default=dict, blank=True)
    quota_spent = models.PositiveIntegerField(default=0)
    hint = models.CharField(max_length=10, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "key"], name="goal_turn_unique_key"),
            models.UniqueConstraint(fields=["agent"],
                                    condition=Q(state__in=list(turn_rules.IN_FLIGHT)),
                                    name="one_goal_turn_in_flight_per_agent"),
        ]


class InboxSettlement(models.Model):
    """The durable effect a drained inbox event came to (a todo, a design revision, an
    explicit no-follow-up rationale or an owner gate), written with the settle itself."""

    event = models.OneToOneField(InboxEvent, on_delete=models.CASCADE,
                                 related_name="settlement")
    effect_kind = models.CharField(max_length=20)
    effect = models.JSONField(default=dict, blank=True)  # owner-local: ids, rationale
    created_at = models.DateTimeField(auto_now_add=True)


class Decision(models.Model):
    """What an inbox event left for a person to decide instead of changing the goal
    (seed 003): an owner gate, a pending decision (a message or comment that contradicts
    accepted state) or an evidence gap. Open until a person resolves it with a note."""

    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="decisions")
    settlement = models.OneToOneField(InboxSettlement, null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="decision")
    kind = models.CharField(max_length=20, choices=_choices(inbox_rules.DECISION_KINDS))
    text = models.TextField(max_length=inbox_rules.DECISION_TEXT_MAX)
    contradicts = models.TextField(max_length=inbox_rules.DECISION_TEXT_MAX, blank=True,
                                   help_text="the accepted state the event disputes")
    todo = models.ForeignKey(Todo, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="decisions")
    state = models.CharField(max_length=10, default="open",
                             choices=[("open", "open"), ("resolved", "resolved")])
    resolution = models.TextField(max_length=inbox_rules.RESOLUTION_MAX, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["goal", "id"]
        indexes = [models.Index(fields=["goal", "state"], name="goal_decision_state")]


class ConnectorReply(models.Model):
    """The one reply an ingress receipt gets through its connector's reply_mode (an inbox
    event's settle reply, or a steered turn's final answer), until the provider shows it
    (goals/replies.py). Owner-local: its text and where it goes."""

    receipt = models.OneToOneField(IngressReceipt, on_delete=models.CASCADE,
                                   related_name="reply")
    text = models.TextField()
    reply_to = models.CharField(max_length=300,
                                help_text="message id, chat:<chat id> or doc:<token>:<id>")
    in_thread = models.BooleanField(default=False)
    # pending (not read back yet) | replied (read back) | gone (the place refuses it)
    state = models.CharField(max_length=10, default="pending")
    reply_ref = models.CharField(max_length=200, blank=True,
                                 help_text="the reply as read back from the provider")
    created_at = models.DateTimeField(auto_now_add=True)
    verified_at = models.DateTimeField(null=True, blank=True)
