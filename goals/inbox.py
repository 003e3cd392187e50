"""Draining an agent's async inbox and settling what it drained, in the acknowledgement
order of seed 003: capture (goals.ingress) → processing (``drain``: a claim with an
expiry, so a crashed drainer's events are taken again) → fresh goal state, the durable
effect and the settle record in one transaction (``settle``) → the optional reply through
the connector, read back from the provider (goals/replies.py, through the outbox) → only
then ACK. Without a reply the settle itself acknowledges, with the outcome
``no_response``. An event from a document-comment connector hands its ACK to the source's
comment cursor (goals/comments.py): only then may the cursor pass the comment.

Duplicates change nothing: a drain with the key of a live claim answers that claim again;
a second settle answers the first one's record; the reply is sent once per receipt."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Case, IntegerField, Q, Value, When
from django.utils import timezone

from goals import actions, comments, locks, replies
from goals.core import inbox as rules
from goals.core.lifecycle import Refused
from goals.core.urgency import ASKS_FOR_REPLY
from goals.models import Goal, InboxEvent, InboxSettlement, Todo


@dataclass(frozen=True)
class Drained:
    key: str
    events: list[InboxEvent]


def drain(goal: str, agent: str, *, limit: int = 1, key: str = "",
          lease_s: int | None = None) -> Drained:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= rules.DRAIN_MAX:
        raise Refused(f"limit must be 1 to {rules.DRAIN_MAX}", code="invalid", status=400,
                      field="limit")
    lease = rules.lease(lease_s)
    now = timezone.now()
    with transaction.atomic(durable=True):
        row = locks.agent_of(goal, agent)
        open_events = InboxEvent.objects.filter(agent=row).select_related("receipt__connector")
        if key:
            mine = list(open_events.filter(state="processing", claim_key=key,
                                           claimed_until__gt=now).order_by("id"))
            if mine:
                return Drained(key, mine)  # the same drain again: its claim, unchanged
        key = key or uuid.uuid4().hex
        return Drained(key, claim(drainable(open_events, now), key, limit, now + lease))


def drainable(events, now):
    """Events a drain may take: pending ones and those whose claim expired."""
    return events.filter(Q(state="pending") | Q(state="processing", claimed_until__lte=now))


def claim(events, key: str, limit: int, until) -> list[InboxEvent]:
    """In the caller's transaction (the agent locked): the first ``limit`` of ``events``
    claimed under ``key`` until ``until`` — those asking for a reply first, then the
    oldest."""
    rank = Case(When(kind__in=ASKS_FOR_REPLY, then=Value(0)), default=Value(1),
                output_field=IntegerField())
    taken = list(events.annotate(rank=rank).order_by("rank", "received_at", "id")[:limit])
    for event in taken:
        event.state, event.claim_key = "processing", key
        event.claimed_until, event.drains = until, event.drains + 1
        event.save(update_fields=["state", "claim_key", "claimed_until", "drains"])
    return taken


def settle(goal: str, agent: str, event_id: int, *, effect: object, reply: object = None,
           key: str = "") -> InboxEvent:
    now = timezone.now()
    with transaction.atomic(durable=True):
        row = locks.agent_of(goal, agent)  # its goal first: the effect may change it
        event = locks.inbox_event(InboxEvent.objects.select_related("receipt__connector")
                                  .filter(agent=row, pk=event_id))
        if event is None:
            raise Refused(f"unknown inbox event {event_id} of agent {agent!r}",
                          code="not_found", status=404)
        if InboxSettlement.objects.filter(event=event).exists():
            return event  # settled before: its effect and reply stand, nothing changes
        if event.state != "processing":
            raise Refused("drain the event before settling it", code="not_drained")
        if key != event.claim_key and rules.claim_live(event.claimed_until, now):
            raise Refused("another drain holds this event", code="claimed_elsewhere",
                          field="key")
        connector = event.receipt.connector
        text = rules.check_reply(reply, connector.reply_mode)
        fresh = Goal.objects.get(pk=row.goal_id)  # locked by agent_of
        checked = rules.check_effect(effect, fresh.state)
        settlement = InboxSettlement.objects.create(event=event, effect_kind=checked.kind)
        settlement.effect = _record(fresh.slug, checked, settlement)
        settlement.save(update_fields=["effect"])
        event.claimed_until = None
        if text:
            reply_to, in_thread = replies.target(connector, event.receipt, event.thread)
            replies.request(event.receipt, text, reply_to, in_thread)
            event.state = "replying"
        else:
            event.state, event.outcome, event.acked_at = "acked", "no_response", now
        event.save(update_fields=["state", "outcome", "acked_at", "claimed_until"])
        if event.state == "acked":
            comments.acknowledged(event)  # a document comment's cursor may pass it now
        return event


def _record(goal: str, effect: rules.Effect, settlement: InboxSettlement) -> dict:
    """Apply the durable effect through goals.actions; answer what the settle keeps."""
    f = effect.fields
    try:
        if effect.kind in rules.DECISION_KINDS:
            decision = actions.open_decision_in_txn(goal, effect.kind, f, settlement)
            return {**{k: v for k, v in f.items() if v is not None},
                    "decision": decision.pk}
        if effect.kind == "todo" and "todo" not in f:
            return {"todo": actions.add_todo_in_txn(goal, f["title"]).pk, "created": True}
        if effect.kind == "todo":
            current = Todo.objects.filter(goal__slug=goal, pk=f["todo"]).first()
            if current is not None:
                rules.check_todo_change(current.pk, current.state)
            todo = actions.change_todo_in_txn(goal, f["todo"], state=f["state"],
                                       evidence=f["evidence"], title=f["title"])
            return {"todo": todo.pk, "created": False, "state": todo.state}
        if effect.kind == "design_revision":
            material = actions.register_material_in_txn(goal, key=f["material"], body=f["body"],
                                                 title=f["title"] or "")
            return {"material": material.key, "revision": material.revision}
    except Refused as exc:
        field = f"effect.{exc.field}" if exc.field else ("effect.todo" if exc.status == 404
                                                          else "effect")
        status = 400 if exc.status == 404 else exc.status
        raise Refused(str(exc), code=exc.code, status=status, field=field) from exc
    return dict(f)
