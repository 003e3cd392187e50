"""Intake's writes (tickets/intake.py): deliveries stored and processed per mailbox, the
sources' health and cursors, replies kept by amux. Ticket-domain state is written by
tickets/actions/; the routing and pull-request facts of a processed delivery are theirs.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import IntegrityError, connection, transaction

from amux_common.clock import now as clock
from tickets.actions.pull_requests import locate_on_pull_request, thread_state_reported
from tickets.actions.routing import route_new
from tickets.core import intake as intake_core
from tickets.models import Delivery, OutgoingMessage, Source, Thread, Trigger

# --- intake (tickets/intake.py) -------------------------------------------------------------


def delivery_received(
    *, source_id: int, delivery_id: str, event: str, mailbox: str, headers: dict, body: bytes
) -> tuple[int | None, bool]:
    """Fact: a verified delivery arrived. Stored raw, unique on (source, delivery id);
    answers (pk, True), or (None, False) when that delivery id was already stored."""
    try:
        with transaction.atomic(durable=True):
            delivery = Delivery.objects.create(
                source_id=source_id, delivery_id=delivery_id, event=event, mailbox=mailbox,
                headers=headers, body=body,
            )
    except IntegrityError:
        return None, False
    return delivery.pk, True


def _lock_mailbox(mailbox: str) -> bool:
    """Serialise processing of one mailbox; answers whether it has unprocessed deliveries.

    PostgreSQL: an advisory transaction lock, and the check in the same round trip (two
    statements; the second takes its snapshot after the lock is held). SQLite: write
    transactions are IMMEDIATE, already serialised."""
    pending = Delivery.objects.filter(mailbox=mailbox, processed_at__isnull=True)
    if connection.vendor != "postgresql":
        return pending.exists()
    sql, params = pending.values("id")[:1].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_advisory_xact_lock(%s, hashtext(%s)); SELECT EXISTS({sql})",
            [0x696E74, mailbox, *params],
        )
        if not cursor.nextset():  # pragma: no cover - a driver without multiple results
            return pending.exists()
        return bool(cursor.fetchone()[0])


class DuplicateDelivery(Exception):  # noqa: N818 - a fact about input, not an error
    """The delivery id was stored before: nothing new is written."""


def mailbox_processed(
    *,
    source: Source,
    mailbox: str,
    translate: Callable[[Delivery], object],
    decide: Callable[[Source, object], dict | None],
    arrived: dict | None = None,
    limit: int = 100,
    cursor: tuple[str, str, dict] | None = None,
) -> dict[int | None, intake_core.Outcome]:
    """Fact: the stored deliveries of one mailbox (`<source>:<thread>`) were processed, in
    order. `translate` turns a stored delivery into TriggerFacts or Ignored (pure plugin
    code); `decide` is the gate seam. A trigger id seen before makes no second trigger.

    `arrived` (a delivery just verified, with its translation as `result`) is processed
    after the stored ones and stored already processed, in the same transaction: one
    commit per webhook. Its delivery id stored before raises DuplicateDelivery and writes
    nothing. Its outcome is under the key None.

    `cursor` (name, value, extra): a catch-up cursor of the source that moves in the same
    transaction, so it never stands for a trigger that was not stored."""
    try:
        return _mailbox_processed(source, mailbox, translate, decide, arrived, limit, True,
                                  cursor)
    except IntegrityError as exc:
        if "delivery_unique_id" in str(exc) or "tickets_delivery.source_id" in str(exc):
            raise DuplicateDelivery(arrived["delivery_id"] if arrived else "") from None
        if "trigger_unique_id" not in str(exc) and "tickets_trigger.source_id" not in str(exc):
            raise
    # The optimistic insert met a trigger seen before: do it again, checking first.
    try:
        return _mailbox_processed(source, mailbox, translate, decide, arrived, limit, False,
                                  cursor)
    except IntegrityError as exc:
        if "delivery_unique_id" in str(exc) or "tickets_delivery.source_id" in str(exc):
            raise DuplicateDelivery(arrived["delivery_id"] if arrived else "") from None
        raise


def _mailbox_processed(source, mailbox, translate, decide, arrived, limit, optimistic,
                       cursor=None):
    results: dict[int | None, intake_core.Outcome] = {}
    with transaction.atomic(durable=True):
        has_pending = _lock_mailbox(mailbox)
        pending = list(
            Delivery.objects.select_for_update()
            .filter(mailbox=mailbox, processed_at__isnull=True)
            .order_by("pk")[:limit]
        ) if has_pending else []
        now = clock()
        for delivery in pending:
            delivery.source = source
            outcome = _record(source, translate(delivery), decide, optimistic=False)
            delivery.processed_at = now
            delivery.outcome, delivery.reason = outcome.outcome, outcome.reason
            delivery.trigger_id = outcome.trigger
            delivery.save(update_fields=["processed_at", "outcome", "reason", "trigger"])
            results[delivery.pk] = outcome
        if arrived is not None:
            outcome = _record(source, arrived["result"], decide, optimistic=optimistic)
            # No savepoint: a duplicate delivery id rolls the whole transaction back.
            Delivery.objects.create(
                source=source, delivery_id=arrived["delivery_id"],
                event=arrived["event"], mailbox=mailbox, headers=arrived["headers"],
                body=arrived["body"], processed_at=now, outcome=outcome.outcome,
                reason=outcome.reason, trigger_id=outcome.trigger,
            )
            results[None] = outcome
        if cursor is not None:
            _move_cursor(source.pk, *cursor)
    return results


def _thread_id(source: Source, result) -> int:
    """The thread's id, created if new (one round trip: insert or keep the existing row)."""
    thread = Thread(source=source, key=(result.thread or "-")[:300],
                    **intake_core.thread_defaults(result))
    Thread.objects.bulk_create([thread], update_conflicts=True,
                               unique_fields=["source", "key"], update_fields=["key"])
    if thread.pk is None:  # a backend that returns no id for a conflicting row
        thread = Thread.objects.get(source=source, key=thread.key)
    return thread.pk


def _record(source: Source, result, decide, *, optimistic: bool) -> intake_core.Outcome:
    result = locate_on_pull_request(source, result)
    facts = intake_core.thread_facts(result)
    thread_id = None
    if (result.thread and facts) or intake_core.is_trigger(result):
        thread_id = _thread_id(source, result)
        if facts:  # the thread's own state: a PR joins or ends its ticket, an issue closes
            thread = Thread.objects.select_for_update().get(pk=thread_id)
            thread.meta = {**thread.meta, **facts}
            thread.save(update_fields=["meta"])
            thread_state_reported(source, thread, facts)
    if not intake_core.is_trigger(result):
        return intake_core.Outcome("ignored", result.reason, thread=thread_id, facts=facts)
    if not optimistic and Trigger.objects.filter(
        source=source, external_id=result.external_id[:300]
    ).exists():
        return intake_core.Outcome("duplicate", "already_seen", thread=thread_id)
    decision = decide(source, result) or {}
    trigger = Trigger(source=source, thread_id=thread_id,
                      **intake_core.trigger_fields(result, decision))
    if decision.get("decision"):
        # Routed in the same transaction (one commit per webhook), the route chosen before
        # the insert so the trigger is written once with its disposition.
        route_new(trigger, decision.get("acceptance"))
    else:
        trigger.save(force_insert=True)
    ignored = decision.get("decision") == "ignore"
    return intake_core.Outcome("ignored" if ignored else "admitted",
                               decision.get("reason") or "", trigger.pk,
                               thread=thread_id, facts=facts)


def source_event_rejected(*, source_id: int, reason: str, error: bool = False) -> None:
    """Fact: a request for this source was refused before anything was stored (or its
    processing failed); kept as one content-free reason in the source's health."""
    with transaction.atomic(durable=True):
        source = Source.objects.select_for_update().filter(pk=source_id).first()
        if source is None:
            return
        source.health = intake_core.note_rejection(source.health, reason, clock(), error)
        source.save(update_fields=["health"])


def source_rejections_counted(*, source_id: int, created_us: int,
                              counts: dict[str, int]) -> bool:
    """Fact: refusals counted outside the database (tickets.rejections) are kept in the
    source's health, in one write. Counts of a source deleted since are dropped (False)."""
    with transaction.atomic(durable=True):
        source = Source.objects.select_for_update().filter(pk=source_id).first()
        if source is None or int(source.created_at.timestamp() * 1_000_000) != created_us:
            return False
        health, now = source.health, clock()
        for reason, n in sorted(counts.items()):
            health = intake_core.note_rejection(health, reason, now, False, n)
        source.health = health
        source.save(update_fields=["health"])
        return True


def source_cursor_moved(*, source_id: int, name: str, cursor: str | None,
                        extra: dict | None = None) -> None:
    """Fact: a catch-up poll stored its triggers; its cursor moves now, never before."""
    with transaction.atomic(durable=True):
        _move_cursor(source_id, name, cursor, extra)


def _move_cursor(source_id: int, name: str, cursor: str | None, extra: dict | None) -> None:
    source = Source.objects.select_for_update().filter(pk=source_id).first()
    if source is None:
        return
    source.health = intake_core.note_cursor(source.health, name, cursor, clock(), extra)
    source.save(update_fields=["health"])


def outgoing_stored(*, source_id: int, thread: str, message_id: str, text: str) -> bool:
    """Fact: a reply kept by amux itself (web chat) was written; once per message id."""
    try:
        with transaction.atomic(durable=True):
            OutgoingMessage.objects.create(
                source_id=source_id, thread_key=thread, message_id=message_id, text=text
            )
    except IntegrityError:
        return False
    return True
