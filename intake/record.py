"""One stored delivery's translation recorded: its thread (and the thread's own state), then
the gate's decision and the trigger, routed by the consumer — in the caller's transaction.
Processing one mailbox (intake/process.py) and many in one transaction (intake/batch.py)
both record through here; a failure is noted on the delivery the same way by both."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable

from django.db import transaction

from amux_common import metrics
from amux_common.wakeups import Wakeup
from effects import outbox
from intake import consumers, profile, source_actions
from intake import rules as intake_core
from intake.decide import decide_incoming
from intake.models import Delivery, Source, Thread, Trigger
from intake.sources.base import Envelope

log = logging.getLogger(__name__)

# A mailbox whose head delivery failed is tried again by this outbox effect, one row per
# mailbox: the outbox's backoff, lease and dead letter (effects/kinds.py), nothing of ours.
RETRY_EFFECT = "intake.retry"

# Intake's space of advisory locks (b"int"): a mailbox is locked by hashtext(mailbox) in it.
MAILBOX_LOCKS = 0x696E74
# What a processed delivery's row changes.
PROCESSED_FIELDS = ["processed_at", "outcome", "reason", "trigger"]

# A poll of one source now, at most once per source every few seconds (debounced).
POLL_SOON = Wakeup("amux:intake:poll-soon:{source_id}", 5, "intake.poll_source")


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def handlers(source: Source, version: str | None = None):
    """How a source's stored deliveries are translated (its plugin) and decided (the
    gate, under `version` when the caller read it already)."""
    plug = profile.translator(source)
    return (functools.partial(translate_stored, plug),
            functools.partial(decide_incoming, version=version))


def translate_stored(plug, delivery: Delivery):
    """A stored delivery, translated by its plugin (which may raise)."""
    thread = delivery.mailbox.partition(":")[2]
    env = Envelope("event", delivery.delivery_id, delivery.event, thread,
                   json.loads(bytes(delivery.body)))
    return plug.translate(env)


def failed(delivery: Delivery, exc: Exception) -> str:
    """The delivery's translation or decision raised: it keeps its error (shown in the admin
    and the source's health) and holds back the deliveries behind it until its mailbox's
    retry processes it. Its first failure puts that retry in the outbox (and answers "");
    a failure of a delivery that failed before is the running retry's: answers its error,
    for the caller to raise once this is committed (the outbox counts it, backs off)."""
    error = error_text(exc)
    log.warning("processing delivery %s (%s) failed: %s", delivery.delivery_id,
                delivery.mailbox, error)
    first = not delivery.last_error
    delivery.last_error = error
    delivery.save(update_fields=["last_error"])
    source_actions.note_rejection(delivery.source_id, "processing_failed", error=True,
                                  message=error)
    if not first:
        return error
    retry_later(delivery, error)
    return ""


def retry_later(delivery: Delivery, error: str) -> None:
    """The retry of the delivery's mailbox, in the caller's transaction, with the failed
    try counted: due after the outbox's first backoff, and from then on the outbox's.
    Written again while that retry runs (a delivery behind the retried one failed), it
    starts the count afresh."""
    outbox.enqueue(RETRY_EFFECT, retry_key(delivery.mailbox),
                   {"source": delivery.source_id, "mailbox": delivery.mailbox,
                    "delivery": delivery.pk}, failed=error)


def retry_key(mailbox: str) -> str:
    """The retry's key: the mailbox, or its start and a digest when it is too long."""
    if len(mailbox) <= outbox.MAX_KEY:
        return mailbox
    return f"{mailbox[:outbox.MAX_KEY - 65]}#{hashlib.sha256(mailbox.encode()).hexdigest()}"


def mark_processed(delivery: Delivery, outcome: intake_core.Outcome, now) -> None:
    """The delivery's row as processed (saved by the caller)."""
    delivery.processed_at = now
    delivery.outcome, delivery.reason = outcome.outcome, outcome.reason
    delivery.trigger_id = outcome.trigger


def located(source: Source, result):
    """The translation as its consumer places it (reads only; may raise)."""
    return consumers.of(source).locate(source, result)


def record(source: Source, result, decide, *, optimistic: bool) -> intake_core.Outcome:
    """A translation located, decided and written (the gate asked only for a trigger)."""
    result = located(source, result)
    return write(source, result, lambda: decide(source, result) or {}, optimistic=optimistic)


def write(source: Source, result, decision: Callable[[], dict], *,
          optimistic: bool) -> intake_core.Outcome:
    """A located translation written: its thread and the thread's own state, then, for a
    trigger not seen before (checked first unless `optimistic`), the trigger with the
    gate's `decision` (asked only then), routed by the consumer."""
    consumer = consumers.of(source)
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
        said = getattr(result, "source_facts", None) or {}
        if "installation" in said:  # a GitHub App's installation: its id, in the secrets
            source_actions.source_state_reported(source.pk, said)
        if "chat" in said:  # the provider's word on one chat (the bot left it)
            source_actions.chat_membership_reported(source.pk, said["chat"]["chat"],
                                                    removed=said["chat"]["removed"])
        if "provider" in said:  # ... or on the whole source (an installation deleted)
            source_actions.provider_state_reported(source.pk,
                                                   disconnected=said["provider"]["disconnected"],
                                                   reason=said["provider"]["reason"])
        if getattr(result, "poll", False):  # completed by the source's poll: ask for it now
            transaction.on_commit(functools.partial(poll_soon, source.pk))
        return intake_core.Outcome("ignored", result.reason, thread=thread_id, facts=facts)
    if not optimistic and Trigger.objects.filter(
        source=source, external_id=result.external_id[:300]
    ).exists():
        return intake_core.Outcome("duplicate", "already_seen", thread=thread_id)
    decided = decision()
    trigger = Trigger(source=source, thread_id=thread_id,
                      **intake_core.trigger_fields(result, decided))
    if decided.get("decision"):
        # Routed in the same transaction (one commit per webhook), the route chosen before
        # the insert so the trigger is written once with its disposition.
        consumer.route_new(trigger, decided.get("acceptance"))
    else:
        trigger.save(force_insert=True)
    transaction.on_commit(functools.partial(metrics.trigger_decided, source.slug,
                                            decided.get("decision") or ""))
    ignored = decided.get("decision") == "ignore"
    return intake_core.Outcome("ignored" if ignored else "admitted",
                               decided.get("reason") or "", trigger.pk,
                               thread=thread_id, facts=facts)


def _thread_id(source: Source, result) -> int:
    """The thread's id, created if new (one round trip: insert or keep the existing row)."""
    thread = Thread(source=source, key=(result.thread or "-")[:300],
                    **intake_core.thread_defaults(result))
    Thread.objects.bulk_create([thread], update_conflicts=True,
                               unique_fields=["source", "key"], update_fields=["key"])
    if thread.pk is None:  # a backend that returns no id for a conflicting row
        thread = Thread.objects.get(source=source, key=thread.key)
    return thread.pk


def poll_soon(source_id: int) -> None:
    """Ask for a poll of one source now (a watched document's comment arrived by webhook
    without its text; its polled copy makes the trigger). Losing it only delays to the
    periodic poll."""
    POLL_SOON.send(source_id=source_id)
