"""The session queue's crash-safe dispatch: one outbox row per queued item (kind
``goals.queue_dispatch``, key ``item:<id>``), ordered in one channel per session, so the
outbox itself keeps the queue's order: only the oldest item's row runs, and the rows behind
it wait for it. The head row delivers its item once the session is idle, through the same
serialized ingress as web chat.

Each delivery is a turn whose key is the item's receipt (``ingress-<id>``), written in the
same transaction that marks the item delivered, so a replay after a crash finds it
delivered and sends nothing twice. A busy session answers ``Later`` (not a failure, the
row keeps its place) and the end of its turn makes the head row due (goals/turn_end.py).
An item whose session is no longer its agent's working session becomes a dead letter
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
# a row waiting for a busy session is woken by the end of its turn; a floor only
WAKE_FLOOR_S = 300


def key_of(item_pk: int) -> str:
    return f"item:{item_pk}"


def channel_of(session_id: int) -> str:
    # "." is not in any source slug: no relay or notice channel (slug:address) is this one
    return f"goals.queue:{session_id}"


def schedule(item: QueuedIngress) -> None:
    """In the caller's transaction: the item's row, in its session's line."""
    outbox.enqueue(EFFECT_KIND, key_of(item.pk), {"item": item.pk},
                   channel=channel_of(item.session_id))


def session_idle(session_id: int) -> None:
    """The session's turn ended: the row of the oldest queued item is due now."""
    head = (QueuedIngress.objects.filter(session_id=session_id, state="queued")
            .order_by("pk").first())
    if head is not None:
        schedule(head)


def _end(items, state: str, reason: str, now) -> None:
    for item in items:
        item.state, item.ended_at = state, now
        item.save(update_fields=["state", "ended_at"])
        receipt = item.receipt
        receipt.outcome = "expired" if state == "expired" else "dead_letter"
        receipt.reason = reason
        receipt.save(update_fields=["outcome", "reason", "updated_at"])


def dispatch(effect_id: int, payload: dict) -> None:
    if "item" not in payload:
        _one_row_per_item(int(payload["session"]))
        return
    item_pk = int(payload["item"])
    session_id = (QueuedIngress.objects.filter(pk=item_pk, state="queued")
                  .values_list("session_id", flat=True).first())
    if session_id is None:
        return  # delivered, cancelled, expired or dead: nothing left to do
    now = timezone.now()
    busy = False
    with transaction.atomic(durable=True):
        items = locks.queued(QueuedIngress.objects.select_related("receipt")
                             .filter(session_id=session_id, state="queued"))
        _end([i for i in items if rules.expired(i.queued_at, now)], "expired", "expired", now)
        items = [i for i in items if not rules.expired(i.queued_at, now)]
        if item_pk not in {i.pk for i in items}:
            # expired just now, or moved to another session (a rebind) meanwhile: that
            # session's line has it (a rebind wrote its row there)
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
            # the head is this row's item, but for an item whose row sits in another
            # line (rebound while its row was pending): the oldest goes first regardless
            turn = services.post_message(session_id, head.text,
                                         key=f"ingress-{head.receipt_id}")
            head.state, head.ended_at = "delivered", now
            head.save(update_fields=["state", "ended_at"])
            receipt = head.receipt
            receipt.outcome, receipt.turn_key = "delivered", turn.key
            receipt.save(update_fields=["outcome", "turn_key", "updated_at"])
            replies.expect_turn(receipt)
            busy = head.pk != item_pk
    if busy:
        # the end of the session's turn makes the head row due (goals/turn_end.py)
        raise outbox.Later(WAKE_FLOOR_S, "session busy")


def _one_row_per_item(session_id: int) -> None:
    """A row of the one-row-per-session shape (written before the queue's order moved
    into the outbox): each queued item of the session gets its row, in order."""
    with transaction.atomic(durable=True):
        for item in locks.queued(QueuedIngress.objects.filter(session_id=session_id,
                                                              state="queued")):
            schedule(item)
