"""Processing per mailbox: stored deliveries become triggers, in order, one mailbox at a time.

ARCHITECTURE.md "Intake": processing runs from the stored row per mailbox
(`<source>:<thread>`), in order, off the request: a webhook stores its delivery
(`delivery_stored`) and wakes the intake drainer (`wake` → the `intake.drain` task →
`drain`); the beat sweep (`process_pending`) processes whatever a lost wake-up left.
A delivery's translation (the plugin) and decision (the gate) happen here; the recorded
trigger goes to its consumer (intake/consumers.py) in the same transaction. A plugin or
gate that raises leaves the delivery unprocessed with its error (shown in the admin and
the source's health), holding back the deliveries behind it in its mailbox; an outbox
effect per failed mailbox (`intake.retry` → `retry_mailbox`) tries it again with the
outbox's growing delays. A trigger id seen before makes no second trigger. The drainer
takes a backlog many mailboxes to a transaction first (intake/batch.py); what that leaves
comes here a mailbox at a time.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from django.db import IntegrityError, connection, transaction
from django.db.models import Min

from amux_common.clock import now as clock
from amux_common.integrity import violates
from amux_common.wakeups import Wakeup
from intake import batch, checked_insert, profile, record, source_actions
from intake import rules as intake_core
from intake.decide import current_version
from intake.models import Delivery, Source

log = logging.getLogger(__name__)

# While one drain task is queued and not yet started, stored deliveries send no other one
# (see `wake`); the flag expires by itself, so a task lost before it started delays the
# next wake-up by at most this long (and the beat sweep runs every 30 s anyway).
WAKE = Wakeup("amux:intake:wake", 10, "intake.drain", gather=0.02)
WAKE_FLAG = WAKE.flag
# One drain task processes at most this long, then leaves the rest to a new task.
DRAIN_SECONDS = 60


class DuplicateDelivery(Exception):  # noqa: N818 - a fact about input, not an error
    """The delivery id was stored before: nothing new is written."""


def delivery_received(
    *, source_id: int, delivery_id: str, event: str, mailbox: str, headers: dict, body: bytes,
    error: str = "",
) -> tuple[int | None, bool]:
    """Fact: a verified delivery arrived. Stored raw, unique on (source, delivery id);
    answers (pk, True), or (None, False) when that delivery id was already stored. With
    `error` (its processing failed already), it waits for its mailbox's retry."""
    try:
        with transaction.atomic(durable=True):
            delivery = Delivery.objects.create(
                source_id=source_id, delivery_id=delivery_id, event=event, mailbox=mailbox,
                headers=headers, body=body, last_error=error,
            )
            if error:
                source_actions.note_rejection(source_id, "processing_failed", error=True,
                                              message=error)
                record.retry_later(delivery, error)
    except IntegrityError as exc:
        if violates(exc, "delivery_unique_id"):
            return None, False
        raise
    return delivery.pk, True


class SourceChanged(Exception):  # noqa: N818 - a fact about the source row, not an error
    """The source row is no longer the one the delivery was verified against (disabled,
    its secrets or config changed, deleted): nothing was stored."""


def delivery_stored(
    *, source_id: int, delivery_id: str, event: str, mailbox: str, headers: dict, body: bytes,
    seen: checked_insert.SourceSeen | None = None,
) -> bool:
    """Fact: a verified delivery arrived and waits to be processed (the webhook's hot path:
    one INSERT, then a wake-up of the drainer once it is committed). False when that
    delivery id was stored before (nothing written).

    With `seen` (the source row as the caller read it, maybe a while ago), the INSERT is
    also the check that the source is still enabled and unchanged, in the same statement
    (one round trip, nothing to race); SourceChanged when it is not."""
    # Autocommit: the INSERT is its own transaction (one round trip). Inside a caller's
    # transaction a savepoint keeps a duplicate from breaking it.
    guard = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with guard:
            if seen is None:
                Delivery(source_id=source_id, delivery_id=delivery_id, event=event,
                         mailbox=mailbox, headers=headers, body=body).save(force_insert=True)
            elif checked_insert.inserted(source_id=source_id, delivery_id=delivery_id,
                                         event=event, mailbox=mailbox, headers=headers,
                                         body=body, seen=seen) is None:
                raise SourceChanged(seen.slug)
    except IntegrityError as exc:
        if violates(exc, "delivery_unique_id"):
            return False
        raise
    transaction.on_commit(wake_soon)
    return True


def wake() -> None:
    """Wake the intake drainer now (debounced: amux_common.wakeups). Losing this only
    delays: the beat sweep processes too. The drain task clears the flag before it reads
    (`_woke`), so it sees every delivery committed before it starts."""
    WAKE.send()


# What a stored delivery calls after commit: the wake-up is sent from a thread of its own, so
# a request is answered without waiting for Redis or the broker (Wakeup.soon).
wake_soon = WAKE.soon


def _woke() -> None:
    WAKE.started()


def drain(seconds: float = DRAIN_SECONDS) -> int:
    """Process every due delivery, mailbox by mailbox, until none is left (what a stored
    delivery wakes); answers how many were processed. Deliveries stored while it runs
    are taken in later rounds; after `seconds` it stops and wakes a successor."""
    _woke()
    deadline = time.monotonic() + seconds
    total = 0
    while True:
        done = process_pending()
        total += done
        if not done:
            return total
        if time.monotonic() > deadline:
            wake()
            return total


def _lock_mailbox(mailbox: str, wait: bool = True) -> bool | None:
    """Serialise processing of one mailbox; answers whether it has unprocessed deliveries,
    or None (without `wait`) when another drainer holds it.

    PostgreSQL: an advisory transaction lock, and the check in the same round trip (two
    statements; the second takes its snapshot after the lock is held). SQLite: write
    transactions are IMMEDIATE, already serialised."""
    pending = Delivery.objects.filter(mailbox=mailbox, processed_at__isnull=True)
    if connection.vendor != "postgresql":
        return pending.exists()
    sql, params = pending.values("id")[:1].query.sql_with_params()
    lock = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {lock}(%s, hashtext(%s)); SELECT EXISTS({sql})",
            [record.MAILBOX_LOCKS, mailbox, *params],
        )
        if not wait and cursor.fetchone()[0] is False:
            return None
        if not cursor.nextset():  # pragma: no cover - a driver without multiple results
            return pending.exists()
        return bool(cursor.fetchone()[0])


class MailboxBusy(Exception):  # noqa: N818 - a fact about concurrency, not an error
    """Another drainer holds the mailbox (only without `wait`)."""


class RetryFailed(Exception):
    """A mailbox's retry met its failed delivery failing again (its error, committed on the
    delivery): raised to the outbox, which counts the try and backs off."""


def mailbox_processed(
    *,
    source: Source,
    mailbox: str,
    translate: Callable[[Delivery], object],
    decide: Callable[[Source, object], dict | None],
    arrived: dict | None = None,
    limit: int = 100,
    cursor: tuple[str, str, dict] | None = None,
    wait: bool = True,
    retrying: bool = False,
) -> dict[int | None, intake_core.Outcome]:
    """Fact: the stored deliveries of one mailbox (`<source>:<thread>`) were processed, in
    order. `translate` turns a stored delivery into TriggerFacts or Ignored (pure plugin
    code); `decide` is the gate seam. A trigger id seen before makes no second trigger.
    A delivery whose translation or decision raises stays unprocessed with its error,
    and so do the ones behind it; one that failed before holds them back as well, unless
    this is its mailbox's retry (`retrying`: it is tried, and failing again raises
    RetryFailed after the commit).

    `arrived` (a delivery just verified, with its translation as `result`) is processed
    after the stored ones and stored already processed, in the same transaction: one
    commit per webhook. When a stored delivery holds the mailbox back, it is stored
    unprocessed behind it (outcome "queued"). Its delivery id stored before raises
    DuplicateDelivery and writes nothing. Its outcome is under the key None.

    `cursor` (name, value, extra): a catch-up cursor of the source that moves in the same
    transaction, so it never stands for a trigger that was not stored.

    Without `wait`, a mailbox another drainer holds raises MailboxBusy at once."""
    try:
        return _mailbox_processed(source, mailbox, translate, decide, arrived, limit, True,
                                  cursor, wait, retrying)
    except IntegrityError as exc:
        if violates(exc, "delivery_unique_id"):
            raise DuplicateDelivery(arrived["delivery_id"] if arrived else "") from None
        if not violates(exc, "trigger_unique_id"):
            raise
    # The optimistic insert met a trigger seen before: do it again, checking first.
    try:
        return _mailbox_processed(source, mailbox, translate, decide, arrived, limit, False,
                                  cursor, wait, retrying)
    except IntegrityError as exc:
        if violates(exc, "delivery_unique_id"):
            raise DuplicateDelivery(arrived["delivery_id"] if arrived else "") from None
        raise


def _mailbox_processed(source, mailbox, translate, decide, arrived, limit, optimistic,
                       cursor=None, wait=True, retrying=False):
    results: dict[int | None, intake_core.Outcome] = {}
    failed_again = ""
    with transaction.atomic(durable=True):
        has_pending = _lock_mailbox(mailbox, wait)
        if has_pending is None:
            raise MailboxBusy(mailbox)
        pending = list(
            Delivery.objects.select_for_update()
            .filter(mailbox=mailbox, processed_at__isnull=True)
            .order_by("pk")[:limit]
        ) if has_pending else []
        now = clock()
        held = False
        for delivery in pending:
            if delivery.last_error and not retrying:
                held = True  # failed before: its retry takes it, the ones behind wait
                break
            delivery.source = source
            try:
                with transaction.atomic():  # a failing plugin undoes only its own writes
                    outcome = record.record(source, translate(delivery), decide,
                                            optimistic=optimistic)
            except IntegrityError:
                raise  # a trigger or delivery id met: mailbox_processed decides, not a failure
            except Exception as exc:
                failed_again = record.failed(delivery, exc)
                held = True
                break
            record.mark_processed(delivery, outcome, now)
            delivery.save(update_fields=record.PROCESSED_FIELDS)
            results[delivery.pk] = outcome
        if arrived is not None:
            if held:
                outcome = intake_core.Outcome("queued", "processing_later")
            else:
                outcome = record.record(source, arrived["result"], decide,
                                        optimistic=optimistic)
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
            source_actions.move_cursor(source.pk, *cursor)
    if failed_again:
        raise RetryFailed(failed_again)
    return results


def process_mailbox(source: Source, mailbox: str, *, wait: bool = True,
                    version: str | None = None, retrying: bool = False):
    """The stored deliveries of one mailbox processed (`version`: the current policy
    version when the caller read it already)."""
    translate, decide = record.handlers(profile.ensure_verified(source), version)
    return mailbox_processed(source=source, mailbox=mailbox, translate=translate,
                             decide=decide, wait=wait, retrying=retrying)


def retry_mailbox(effect_id: int, payload: dict) -> None:
    """The outbox's `intake.retry` (record.RETRY_EFFECT): the mailbox processed again from
    its failed delivery. Failing again raises, so the outbox backs off, and once the tries
    are used up keeps the retry as a dead letter an operator can put back in line."""
    source = Source.objects.get(pk=payload["source"])
    process_mailbox(source, payload["mailbox"], retrying=True)


def process_pending(limit: int = 200) -> int:
    """Process every mailbox with stored, unprocessed deliveries (the drainer and the
    periodic sweep) but those whose first one failed: their retry (an outbox effect)
    processes them. Answers how many deliveries were processed.

    Mailboxes another drainer holds are skipped at first and waited for at the end, so two
    drainers share the work instead of queueing behind each other's locks, and nothing
    committed before this began is left behind."""
    heads = (Delivery.objects.filter(processed_at__isnull=True).values("mailbox")
             .annotate(first=Min("id")).values("first"))
    rows = list(Delivery.objects.filter(pk__in=heads, last_error="").order_by("pk")
                .values_list("source_id", "mailbox")[:limit])
    if not rows:
        return 0
    # One read of the policy version per batch: a batch decides under the version current
    # when it began, as a webhook processed inline did under the one read with its source.
    version = current_version()
    sources: dict[int, Source] = {}

    def source_of(source_id: int) -> Source:
        if source_id not in sources:
            sources[source_id] = profile.ensure_verified(Source.objects.get(pk=source_id))
        return sources[source_id]

    done = 0
    if len(rows) > 1:
        done, rows = batch.processed_together(rows, source_of, version)
    busy = []
    for wait, todo in ((False, rows), (True, busy)):
        for source_id, mailbox in todo:
            source = source_of(source_id)
            try:
                done += len(process_mailbox(source, mailbox, wait=wait, version=version))
            except MailboxBusy:
                busy.append((source_id, mailbox))
            except Exception as exc:
                log.exception("processing mailbox %s failed", mailbox)
                source_actions.note_rejection(source_id, "processing_failed", error=True,
                                              message=record.error_text(exc))
    return done

