"""The session queue's crash-safe dispatch: one outbox row per session (kind
``goals.queue_dispatch``, key ``session:<id>``) delivers the oldest queued item once the
session is idle, one at a time, through the same serialized ingress as web chat.

Each delivery is a turn whose key is the item's receipt (``ingress-<id>``), written in the
same transaction that marks the item delivered, so a replay after a crash finds it
delivered and sends nothing twice. A busy session answers ``Later`` (not a failure) and the
end of its turn wakes the row (goals/turn_end.py). An
item whose session is no longer its agent's working session becomes a dead letter
(``session_replaced``) until an explicit rebind (goals.actions.rebind) queues it again."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from effects import outbox
from goals import locks, replies
from goals.core import ingress as rules
from goals.models import QueuedIngress, WorkingSession
from sessions import services
from sessions.models import Lifecycle, Session, Turn, TurnState

EFFECT_KIND = "goals.queue_dispatch"


def key_of(session_id: int) -> str:
    return f"session:{session_id}"


def schedule(session_id: int) -> None:
    outbox.enqueue(EFFECT_KIND, key_of(session_id), {"session": session_id})


def _end(items, state: str, reason: str, now) -> None:
    for item in items:
        item.state, item.ended_at = state, now
        item.save(update_fields=["state", "ended_at"])
        receipt = item.receipt
        receipt.outcome = "expired" if state == "expired" else "dead_letter"
        receipt.reason = reason
        receipt.save(update_fields=["outcome", "reason", "updated_at"])


def dispatch(effect_id: int, payload: dict) -> None:
    session_id = int(payload["session"])
    now = timezone.now()
    busy = more = False
    with transaction.atomic(durable=True):
        items = locks.queued(QueuedIngress.objects.select_related("receipt")
                             .filter(session_id=session_id, state="queued"))
        _end([i for i in items if rules.expired(i.queued_at, now)], "expired", "expired", now)
        items = [i for i in items if not rules.expired(i.queued_at, now)]
        if not items:
            return
        session = Session.objects.get(pk=session_id)
        head = items[0]
        bound = WorkingSession.objects.filter(agent_id=head.agent_id, active=True,
                                              session_id=session_id).exists()
        if not bound:
            _end(items, "dead", "session_replaced", now)
            return
        if session.lifecycle == Lifecycle.ARCHIVED:
            _end(items, "dead", "session_terminal", now)
            return
        busy = Turn.objects.filter(session_id=session_id,
                                   state__in=[TurnState.QUEUED, TurnState.RUNNING]).exists()
        if not busy:
            turn = services.post_message(session_id, head.text,
                                         key=f"ingress-{head.receipt_id}")
            head.state, head.ended_at = "delivered", now
            head.save(update_fields=["state", "ended_at"])
            receipt = head.receipt
            receipt.outcome, receipt.turn_key = "delivered", turn.key
            receipt.save(update_fields=["outcome", "turn_key", "updated_at"])
            replies.expect_turn(receipt)
            more = len(items) > 1
            if more:
                schedule(session_id)  # replaces this running row: it runs again after
    if busy:
        # the end of the session's turn wakes this row (goals/turn_end.py); a floor only
        raise outbox.Later(replies.WAKE_FLOOR_S, "session busy")
