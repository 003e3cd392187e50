"""The outbox table: one row per (kind, key) of work on the outside world (effects/outbox.py).

Every app that decides something outside the database (tickets, sessions, what comes next)
writes a row here in the same transaction as the decision; the drainer does the work after
commit. This app imports no other app of ours: the apps above it register the handlers.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class EffectKind(models.TextChoices):
    DISPATCH = "dispatch", "dispatch an assignment"
    DELIVER = "deliver", "deliver an input"
    RELAY = "relay", "relay a report"
    NOTICE = "notice", "send a notice"
    ASSESS = "assess", "run an assessment"
    ACK = "ack", "acknowledge a source event"
    TURN_ENDED = "session.turn_ended", "report the end of a session's turn"


class EffectState(models.TextChoices):
    PENDING = "pending", "pending"
    DEAD = "dead", "dead letter"


class Effect(models.Model):
    """A row lives from the transaction that decided the work until its handler returns;
    then it is deleted. `claimed_by`/`claimed_until` are a drainer's lease, `version` grows
    each time the payload is replaced, `state` is `dead` once the attempts are used up.
    """

    kind = models.CharField(max_length=40, choices=EffectKind.choices)
    key = models.CharField(max_length=300)
    payload = models.JSONField(default=dict, blank=True)
    channel = models.CharField(max_length=300, blank=True, help_text="order key (relay, notice)")
    state = models.CharField(max_length=10, choices=EffectState.choices, default="pending")
    version = models.PositiveIntegerField(default=1)
    attempts = models.PositiveIntegerField(default=0)
    due_at = models.DateTimeField()
    claimed_by = models.CharField(max_length=120, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "key"], name="effect_one_pending", condition=Q(state="pending")
            )
        ]
        indexes = [
            # The line of one kind, in order (claim).
            models.Index(fields=["kind", "id"], name="effect_line", condition=Q(state="pending")),
            # Is anything ahead of this row in its channel? (relay and notice share channels)
            models.Index(
                fields=["channel", "id"],
                name="effect_ordered",
                condition=Q(state="pending", kind__in=["relay", "notice"]),
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
