"""One entry point for every connector's events: ``accept(connector, event)``.

In one transaction, with the agent and then the connector locked: a replayed dedupe key
answers the receipt it already has (nothing is delivered twice); otherwise the pure rule
(goals.core.ingress) picks exactly one effective mode, and the receipt and its one effect —
a turn in the working session, a queued item, or an inbox event — are written together."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from effects import outbox
from goals import locks, queue, replies
from goals.core import inbox_turns
from goals.core import ingress as rules
from goals.core import urgency as projection
from goals.core.lifecycle import ATTACHED, MANAGED, Refused
from goals.models import (
    Agent,
    Connector,
    InboxEvent,
    IngressReceipt,
    QueuedIngress,
    WorkingSession,
)
from sessions import app_servers, services
from sessions.models import Lifecycle, SleepReason


@dataclass(frozen=True)
class Event:
    """A normalized connector event. ``place`` is the chat id or document token the
    provider saw it in (checked against the connector's ``source_ref``; "" for web chat)."""

    dedupe_key: str
    kind: str
    text: str
    actor: str = ""
    addressed: bool = False
    thread: str = ""
    at: datetime | None = None
    place: str = ""
    origin: dict = field(default_factory=dict)


def check_event(event: Event) -> None:
    if not isinstance(event.dedupe_key, str) or not 0 < len(event.dedupe_key) <= 200:
        raise Refused("dedupe_key must be 1 to 200 characters", code="invalid", status=400,
                      field="dedupe_key")
    if event.kind not in rules.EVENT_KINDS:
        raise Refused(f"kind must be one of {', '.join(rules.EVENT_KINDS)}", code="invalid",
                      status=400, field="kind")


def session_status(agent: Agent) -> tuple[str, WorkingSession | None]:
    """The agent's working session as verified now: live, or why it is not."""
    bindings = list(agent.bindings.filter(active=True).select_related("session")[:2])
    if not bindings:
        return "no_session", None
    if len(bindings) > 1:
        return "session_ambiguous", None
    binding = bindings[0]
    session = binding.session
    if WorkingSession.objects.filter(session=session, active=True).exclude(
            agent=agent).exists():
        return "session_foreign", None
    if session.lifecycle == Lifecycle.ARCHIVED:
        return "session_terminal", binding
    if binding.mode == ATTACHED:
        # the app-server is checked now: a lost one fails closed, never a managed start
        return (rules.LIVE if app_servers.thread_live(session) else "session_stale"), binding
    if agent.lifecycle == "stale" or session.sleep_reason == SleepReason.RESTART_FAILED:
        return "session_stale", binding
    return rules.LIVE, binding


def accept(connector: Connector, event: Event) -> IngressReceipt:
    check_event(event)
    now = timezone.now()
    with transaction.atomic():  # a step of intake's transaction (goals/consumer.py)
        agent = locks.agent(connector.agent_id)
        conn = locks.for_update(Connector.objects.filter(pk=connector.pk)).get()
        seen = conn.receipts.filter(dedupe_key=event.dedupe_key).first()
        if seen is not None:
            return seen
        origin = {"via": "connector", "source_kind": conn.source_kind, **event.origin}
        receipt = IngressReceipt(connector=conn, dedupe_key=event.dedupe_key,
                                 event_kind=event.kind, origin=origin)
        if conn.state == "disconnected" or conn.goal_id != agent.goal_id:
            receipt.outcome = "refused"
            receipt.reason = ("connector_disconnected" if conn.state == "disconnected"
                              else "session_foreign")
            receipt.save()
            return receipt
        status, binding = session_status(agent)
        queued_now = (QueuedIngress.objects.filter(session=binding.session, state="queued")
                      .count() if binding else 0)
        decision = rules.decide(
            capture_scope=conn.capture_scope, ingress_mode=conn.ingress_mode,
            fallback=conn.fallback, addressed=event.addressed,
            place_matches=not conn.source_ref or event.place == conn.source_ref,
            session=status, queue_length=queued_now)
        if decision.outcome in ("delivered", "queued") and not event.text.strip():
            decision = rules.Decision("refused", "", decision.fallback_used, "empty")
        receipt.selected_mode = decision.mode
        receipt.fallback_used = decision.fallback_used
        receipt.outcome = decision.outcome
        receipt.reason = decision.reason
        if decision.outcome in ("delivered", "queued"):
            receipt.session = binding.session
        receipt.save()
        if decision.outcome == "delivered":
            try:
                turn = services.post_message(binding.session_id, event.text,
                                             key=f"ingress-{receipt.pk}")
            except services.CommandError:
                receipt.outcome, receipt.reason = "refused", "session_refused"
            else:
                receipt.turn_key = turn.key
                replies.expect_turn(receipt)
            receipt.save(update_fields=["outcome", "reason", "turn_key", "updated_at"])
        elif decision.outcome == "queued":
            queue.schedule(QueuedIngress.objects.create(
                receipt=receipt, session=binding.session, agent=agent, text=event.text,
                queued_at=now))
        elif decision.outcome == "inboxed":
            InboxEvent.objects.create(receipt=receipt, agent=agent, kind=event.kind,
                                      text=event.text, actor=event.actor,
                                      thread=event.thread, place=event.place,
                                      received_at=event.at or now)
            if agent.mode == MANAGED:
                # the agent's lane drains it in a turn of its own (goals/inbox_turns.py)
                outbox.enqueue(inbox_turns.EFFECT_KIND, inbox_turns.agent_key(agent.pk),
                               {"agent": agent.pk})
        return receipt


def urgency(agent: Agent) -> dict:
    # reply_due lasts until the ACK: drained and settled events still count
    pending = agent.inbox.exclude(state="acked").values_list("kind", "received_at")
    return projection.project(list(pending), timezone.now())
