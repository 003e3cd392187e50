"""Many mailboxes in one transaction: the drainer's way through a backlog, on PostgreSQL
and SQLite alike.

Processing one mailbox at a time (intake/process.py) costs about ten round trips a mailbox
— its own transaction, lock, read, savepoint and update — and when every delivery has a
thread of its own (a busy repository), that is ten a delivery. Here a batch of mailboxes
shares them: one transaction, one statement that try-locks them all, one read of their
deliveries and one update of the processed rows; each delivery still records its thread
and trigger in order (intake/record.py), and the gate and the plugin are asked exactly as
one mailbox at a time asks them. On SQLite a write transaction holds the whole database,
so every mailbox of the batch is its own; the statements are made from the model for both.

What differs is only what a failure undoes. A delivery whose translation or decision
raises is noted as failed, holding back its mailbox, as before: neither writes anything.
A mailbox whose first delivery failed before is left to its retry (record.RETRY_EFFECT).
Anything that fails while writing (a trigger id seen before, a consumer's error, a row
lock not had within LOCK_WAIT) undoes the whole batch, and its mailboxes go back to the
one-mailbox path, which decides each case as it always has."""

from __future__ import annotations

import logging
import re

from django.db import IntegrityError, OperationalError, connection, transaction

from amux_common.clock import now as clock
from intake import record
from intake import rules as intake_core
from intake.models import Delivery, Source

log = logging.getLogger(__name__)

# Mailboxes a transaction takes, and the deliveries it reads at most (the oldest first, so
# each mailbox gets a prefix of its own, in order; the rest waits for the next round).
MAILBOXES, DELIVERIES = 50, 400
# How long a batch waits for a row lock before it is undone. A batch holds the locks of many
# threads and tickets at once, so it could close a deadlock that a mailbox alone could
# not; waiting less than PostgreSQL's deadlock_timeout (1 s) makes the batch, never the
# other transaction (a turn ending, an operator's edit), the one that gives way.
LOCK_WAIT = "200ms"


def processed_together(rows: list[tuple[int, str]], source_of,
                       version: str | None) -> tuple[int, list]:
    """Process the mailboxes of `rows` ((source id, mailbox), each once), a batch to a
    transaction, deciding under policy `version`; `source_of(source_id)` answers the
    Source. Answers how many deliveries were processed, and the rows left for the
    one-mailbox path: held by another drainer, or in a batch that was undone."""
    done, left = 0, []
    handlers: dict[int, tuple] = {}

    def handlers_of(source: Source) -> tuple:
        if source.pk not in handlers:
            handlers[source.pk] = record.handlers(source, version)
        return handlers[source.pk]
    for start in range(0, len(rows), MAILBOXES):
        batch = rows[start:start + MAILBOXES]
        try:
            count, busy = _batch(batch, source_of, handlers_of)
        except (IntegrityError, OperationalError) as exc:  # a trigger seen before, a lock
            log.info("a batch of %d mailboxes was undone (%s); one at a time instead",
                     len(batch), record.error_text(exc))
            left.extend(batch)
        except Exception:  # anything else is a fault worth seeing: each batch would pay it
            log.warning("a batch of %d mailboxes failed; one at a time instead", len(batch),
                        exc_info=True)
            left.extend(batch)
        else:
            done += count
            left.extend(busy)
    return done, left


def _batch(batch, source_of, handlers_of) -> tuple[int, list]:
    with transaction.atomic(durable=True):
        locked = _try_lock([mailbox for _, mailbox in batch])
        busy = [row for row in batch if row[1] not in locked]
        if not locked:
            return 0, busy
        deliveries = list(
            Delivery.objects.select_for_update()
            .filter(mailbox__in=locked, processed_at__isnull=True)
            .order_by("pk")[:DELIVERIES]
        )
        now = clock()
        held: set[str] = set()
        processed = []
        for delivery in deliveries:
            if delivery.mailbox in held:
                continue
            if delivery.last_error:
                held.add(delivery.mailbox)  # failed before: left with the rest to its retry
                continue
            source = source_of(delivery.source_id)
            delivery.source = source
            translate, decide = handlers_of(source)
            try:  # reads only: a failure here leaves nothing to undo
                result = record.located(source, translate(delivery))
                decision = (decide(source, result) or {}) if intake_core.is_trigger(result) \
                    else {}
            except Exception as exc:
                record.failed(delivery, exc)
                held.add(delivery.mailbox)
                continue
            outcome = record.write(source, result, lambda d=decision: d, optimistic=True)
            record.mark_processed(delivery, outcome, now)
            processed.append(delivery)
        _mark_processed(processed, now)
    return len(processed), busy


def _mark_processed(deliveries: list[Delivery], now) -> None:
    """The processed rows updated in one statement (what record.mark_processed set on each:
    the time for all, an outcome, reason and trigger each). Django's bulk_update builds a
    CASE per row and field, which cost more than the rows' work."""
    if not deliveries:
        return
    per_row = [[d.outcome, d.reason, d.trigger_id, d.pk] for d in deliveries]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # one statement for all rows
            cursor.execute(_update_all_sql(), [now, *map(list, zip(*per_row, strict=True))])
        else:  # in process: a statement per row costs no round trip
            cursor.executemany(_update_one_sql(), [[now, *row] for row in per_row])


# What processing sets on each row: one value for the whole batch, then one value each.
SET_ALL, SET_EACH = "processed_at", ("outcome", "reason", "trigger")


def _columns(names) -> list[str]:
    return [connection.ops.quote_name(Delivery._meta.get_field(name).column) for name in names]


def _update_one_sql() -> str:
    (processed,) = _columns([SET_ALL])
    each = ", ".join(f"{c} = %s" for c in _columns(SET_EACH))
    return (f"UPDATE {connection.ops.quote_name(Delivery._meta.db_table)} SET "
            f"{processed} = %s, {each} WHERE {_columns(['id'])[0]} = %s")


def _array_type(field) -> str:
    """The array a column's values travel in: the field's own database type, its length
    left off (a varchar(n)[] cast would cut a longer value short instead of refusing it)."""
    return re.sub(r"\(.*\)", "", field.cast_db_type(connection)) + "[]"


def _update_all_sql() -> str:
    (processed,) = _columns([SET_ALL])
    names = (*SET_EACH, "id")
    fields = [Delivery._meta.get_field(name) for name in names]
    arrays = ", ".join(f"%s::{_array_type(f)}" for f in fields)
    each = ", ".join(f"{c} = v.{n}" for c, n in zip(_columns(SET_EACH), SET_EACH, strict=True))
    return (f"UPDATE {connection.ops.quote_name(Delivery._meta.db_table)} AS d SET "
            f"{processed} = %s, {each} FROM unnest({arrays}) "
            f"AS v({', '.join(names)}) WHERE d.{_columns(['id'])[0]} = v.id")


def _try_lock(mailboxes: list[str]) -> set[str]:
    """The mailboxes whose advisory locks this transaction got (one statement; the ones
    another drainer holds are left to it), and the transaction's wait for row locks cut
    short. SQLite's write transaction holds them all already."""
    if connection.vendor != "postgresql":
        return set(mailboxes)
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
        cursor.execute(
            "SELECT m FROM unnest(%s::text[]) AS m "
            "WHERE pg_try_advisory_xact_lock(%s, hashtext(m))",
            [mailboxes, record.MAILBOX_LOCKS],
        )
        return {row[0] for row in cursor.fetchall()}
