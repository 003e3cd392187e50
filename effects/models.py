"""The outbox table: one row per (kind, key) of work on the outside world (effects/outbox.py).

Every app that decides something outside the database (tickets, sessions, what comes next)
writes a row here in the same transaction as the decision; the drainer does the work after
commit. This app imports no other app of ours: the apps above it register the handlers.
"""

from __future__ import annotations

import secrets

from django.db import connection, models
from django.db.models import Case, Q, Value, When

from effects.kinds import ORDERED_KINDS


class EffectKind(models.TextChoices):
    DISPATCH = "dispatch", "dispatch an assignment"
    DELIVER = "deliver", "deliver an input"
    RELAY = "relay", "relay a report"
    NOTICE = "notice", "send a notice"
    ASSESS = "assess", "run an assessment"
    TURN_ENDED = "session.turn_ended", "a session's turn ended (one row per subscriber)"
    CONVERSATION_REPLY = "conversation.reply", "show a turn in its Lark conversation"
    CONVERSATION_CARD = "conversation.card", "send or update an event card in Lark"
    GOALS_QUEUE_DISPATCH = "goals.queue_dispatch", "deliver a session's queued ingress"
    INTAKE_ACK = "intake.ack", "reply to a source event, read it back, acknowledge it"
    INTAKE_RETRY = "intake.retry", "process a mailbox again from its failed delivery"
    GOALS_CONNECTOR_REPLY = "goals.connector_reply", "reply through a connector, read it back"
    GOALS_ATTACHED_WRITEBACK = "goals.attached_writeback", "check an attached agent's done"
    GOALS_INBOX_TURN = "goals.inbox_turn", "drain a managed agent's inbox in a turn, settle it"
    MAIN_NOTIFY = "main.notify", "tell the main session of a request or follow-up"
    GOALS_TURN = "goals.turn", "supervise a managed turn until it settles"
    SCHEDULE_FIRE = "schedule.fire", "set a schedule's run going"
    POLICY_APPLY = "policy.apply", "apply a saved policy version to live work"


class EffectState(models.TextChoices):
    PENDING = "pending", "pending"
    DEAD = "dead", "dead letter"


def new_version() -> int:
    """A payload's version: a fresh random number each time it is stored, so a drainer can
    tell that the row it runs was replaced meanwhile (an upsert cannot count up)."""
    return secrets.randbits(62) + 1


class Effect(models.Model):
    """A row lives from the transaction that decided the work until its handler returns;
    then it is deleted. `claimed_by`/`claimed_until` are a drainer's lease, `version`
    changes each time the payload is replaced, `state` is `dead` once the attempts are used
    up. `line` is TRUE while pending and NULL once dead, so one plain unique constraint on
    (kind, key, line) allows one pending row per (kind, key) beside any number of dead
    letters, and an upsert can name it as its conflict target on PostgreSQL and SQLite.
    """

    kind = models.CharField(max_length=40, choices=EffectKind.choices)
    key = models.CharField(max_length=300)
    payload = models.JSONField(default=dict, blank=True)
    channel = models.CharField(max_length=300, blank=True, help_text="order key (ordered kinds)")
    state = models.CharField(max_length=10, choices=EffectState.choices, default="pending")
    version = models.PositiveBigIntegerField(default=new_version)
    attempts = models.PositiveIntegerField(default=0)
    due_at = models.DateTimeField()
    claimed_by = models.CharField(max_length=120, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    line = models.GeneratedField(
        expression=Case(When(state="pending", then=Value(True)), default=None),
        output_field=models.BooleanField(null=True),
        db_persist=True,
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "key", "line"], name="effect_one_pending")
        ]
        indexes = [
            # The line of one kind, in order (claim).
            models.Index(fields=["kind", "id"], name="effect_line", condition=Q(state="pending")),
            # Is anything ahead of this row in its channel? (the ordered kinds)
            models.Index(
                fields=["channel", "id"],
                name="effect_ordered",
                condition=Q(state="pending", kind__in=ORDERED_KINDS),
            ),
            # Who holds leases of a kind (per-kind concurrency).
            models.Index(
                fields=["kind", "claimed_until"],
                name="effect_leased",
                condition=Q(state="pending", claimed_until__isnull=False),
            ),
        ]

    def __str__(self):
        return f"{self.kind}:{self.key}"


class ClaimTurn(models.Model):
    """The one row drainers lock (`select_for_update`) while they claim: claims take turns,
    so each kind's count of drainers holding leases is exact when the next claim reads it.
    Handlers run outside the turn; a claim holds it for a few short queries."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="claim_turn_one_row")]

    def __str__(self):
        return "claim turn"

    @classmethod
    def take(cls) -> None:
        """Wait for the turn, inside the caller's transaction (released at its end). On
        SQLite, which has no row locks, the IMMEDIATE write transaction is the turn."""
        if connection.features.has_select_for_update:
            cls.objects.select_for_update().get_or_create(pk=1)
        else:
            cls.objects.get_or_create(pk=1)
