"""Processing per mailbox: stored deliveries become triggers, in order, one mailbox at a time.

ARCHITECTURE.md "Intake": processing runs from the stored row per mailbox
(`<source>:<thread>`), in order. A delivery's translation (the plugin) and decision (the
gate) happen here; the recorded trigger goes to its consumer (intake/consumers.py) in the
same transaction. A plugin or gate that raises leaves the delivery unprocessed with its
error (shown in the admin and the source's health), holding back the deliveries behind it
in its mailbox; the intake sweep tries it again with growing delays. A trigger id seen
before makes no second trigger.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Min, Q

from amux_common.clock import now as clock
from amux_common.integrity import violates
from intake import consumers, health
from intake import rules as intake_core
from intake.decide import decide_incoming
from intake.models import Delivery, Source, Thread, Trigger
from intake.sources import plugin
from intake.sources.base import Envelope

log = logging.getLogger(__name__)

# Delays between tries of a delivery that failed: 30 s doubling, at most an hour.
RETRY_FIRST, RETRY_MAX = 30, 3600


class DuplicateDelivery(Exception):  # noqa: N818 - a fact about input, not an error
    """The delivery id was stored before: nothing new is written."""


def retry_delay(attempts: int) -> timedelta:
    return timedelta(seconds=min(RETRY_MAX, RETRY_FIRST * 2 ** max(0, attempts - 1)))


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def translate_stored(plug, delivery: Delivery):
    """A stored delivery, translated by its plugin (which may raise)."""
    thread = delivery.mailbox.partition(":")[2]
    env = Envelope("event", delivery.delivery_id, delivery.event, thread,
                   json.loads(bytes(delivery.body)))
    return plug.translate(env)


def delivery_received(
    *, source_id: int, delivery_id: str, event: str, mailbox: str, headers: dict, body: bytes,
    error: str = "",
) -> tuple[int | None, bool]:
    """Fact: a verified delivery arrived. Stored raw, unique on (source, delivery id);
    answers (pk, True), or (None, False) when that delivery id was already stored. With
    `error` (its processing failed already), it waits for its first retry."""
    now = clock()
    try:
        with transaction.atomic(durable=True):
            delivery = Delivery.objects.create(
                source_id=source_id, delivery_id=delivery_id, event=event, mailbox=mailbox,
                headers=headers, body=body, attempts=1 if error else 0, last_error=error,
                retry_at=now + retry_delay(1) if error else None,
            )
            if error:
                health.note_rejection(source_id, "processing_failed", error=True)
    except IntegrityError as exc:
        if violates(exc, "delivery_unique_id"):
            return None, False
        raise
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
    A delivery whose translation or decision raises stays unprocessed with its error,
    and so do the ones behind it; one waiting for its retry (`retry_at`) holds them back
    as well.

    `arrived` (a delivery just verified, with its translation as `result`) is processed
    after the stored ones and stored already processed, in the same transaction: one
    commit per webhook. When a stored delivery holds the mailbox back, it is stored
    unprocessed behind it (outcome "queued"). Its delivery id stored before raises
    DuplicateDelivery and writes nothing. Its outcome is under the key None.

    `cursor` (name, value, extra): a catch-up cursor of the source that moves in the same
    transaction, so it never stands for a trigger that was not stored."""
    try:
        return _mailbox_processed(source, mailbox, translate, decide, arrived, limit, True,
                                  cursor)
    except IntegrityError as exc:
        if violates(exc, "delivery_unique_id"):
            raise DuplicateDelivery(arrived["delivery_id"] if arrived else "") from None
        if not violates(exc, "trigger_unique_id"):
            raise
    # The optimistic insert met a trigger seen before: do it again, checking first.
    try:
        return _mailbox_processed(source, mailbox, translate, decide, arrived, limit, False,
                                  cursor)
    except IntegrityError as exc:
        if violates(exc, "delivery_unique_id"):
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
        held = False
        for delivery in pending:
            if delivery.retry_at is not None and delivery.retry_at > now:
                held = True  # its retry is not due yet; the ones behind it wait with it
                break
            delivery.source = source
            try:
                with transaction.atomic():  # a failing plugin undoes only its own writes
                    outcome = _record(source, translate(delivery), decide,
                                      optimistic=False)
            except IntegrityError:
                raise  # a trigger or delivery id met: mailbox_processed decides, not a failure
            except Exception as exc:
                _failed(delivery, exc, now)
                held = True
                break
            delivery.processed_at = now
            delivery.outcome, delivery.reason = outcome.outcome, outcome.reason
            delivery.trigger_id = outcome.trigger
            delivery.retry_at = None
            delivery.save(update_fields=["processed_at", "outcome", "reason", "trigger",
                                         "retry_at"])
            results[delivery.pk] = outcome
        if arrived is not None:
            if held:
                outcome = intake_core.Outcome("queued", "processing_later")
            else:
                outcome = _record(source, arrived["result"], decide, optimistic=optimistic)
            # No savepoint: a duplicate delivery id rolls the whole transaction back.
            Delivery.objects.create(
                source=source, delivery_id=arrived["delivery_id"],
                event=arrived["event"], mailbox=mailbox, headers=arrived["headers"],
                body=arrived["body"], processed_at=None if held else now,
                outcome="" if held else outcome.outcome,
                reason="" if held else outcome.reason, trigger_id=outcome.trigger,
            )
            results[None] = outcome
        if cursor is not None:
            health.move_cursor(source.pk, *cursor)
    return results


def _failed(delivery: Delivery, exc: Exception, now) -> None:
    log.warning("processing delivery %s (%s) failed: %s", delivery.delivery_id,
                delivery.mailbox, error_text(exc))
    delivery.attempts += 1
    delivery.last_error = error_text(exc)
    delivery.retry_at = now + retry_delay(delivery.attempts)
    delivery.save(update_fields=["attempts", "last_error", "retry_at"])
    health.note_rejection(delivery.source_id, "processing_failed", error=True)


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
    consumer = consumers.of(source)
    result = consumer.locate(source, result)
    facts = intake_core.thread_facts(result)
    thread_id = None
    if (result.thread and facts) or intake_core.is_trigger(result):
        thread_id = _thread_id(source, result)
        if facts:  # the thread's own state: a PR joins or ends its ticket, an issue closes
            thread = Thread.objects.select_for_update().get(pk=thread_id)
            thread.meta = {**thread.meta, **facts}
            thread.save(update_fields=["meta"])
            consumer.thread_state_reported(source, thread, facts)
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
        consumer.route_new(trigger, decision.get("acceptance"))
    else:
        trigger.save(force_insert=True)
    ignored = decision.get("decision") == "ignore"
    return intake_core.Outcome("ignored" if ignored else "admitted",
                               decision.get("reason") or "", trigger.pk,
                               thread=thread_id, facts=facts)


def process_mailbox(source: Source, mailbox: str):
    plug = plugin(source.kind, source.config, source.secrets)
    return mailbox_processed(
        source=source, mailbox=mailbox, translate=lambda d: translate_stored(plug, d),
        decide=decide_incoming,
    )


def process_pending(limit: int = 200) -> int:
    """Process every mailbox with stored, unprocessed deliveries that are due (the
    periodic sweep); a delivery waiting for its retry keeps its mailbox until then."""
    heads = (Delivery.objects.filter(processed_at__isnull=True).values("mailbox")
             .annotate(first=Min("id")).values("first"))
    due = Q(retry_at__isnull=True) | Q(retry_at__lte=clock())
    rows = (Delivery.objects.filter(due, pk__in=heads).order_by("pk")
            .values_list("source_id", "mailbox")[:limit])
    done = 0
    sources = {}
    for source_id, mailbox in rows:
        source = sources.get(source_id) or Source.objects.get(pk=source_id)
        sources[source_id] = source
        try:
            done += len(process_mailbox(source, mailbox))
        except Exception:
            log.exception("processing mailbox %s failed", mailbox)
            health.note_rejection(source_id, "processing_failed", error=True)
    return done
