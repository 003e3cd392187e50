"""Catching up through a source's API on what its receiver missed (GitHub's catch-up poll,
the comments of the documents a Lark source watches). Polled events enter like webhook
deliveries — same translation, same trigger ids, so a webhook and a poll of the same thing
make one trigger — and a cursor moves only after what it stands for is stored."""

from __future__ import annotations

import functools
import logging

from django.utils import timezone

from intake import consumers, health, process
from intake.decide import decide_incoming
from intake.models import Delivery, Source
from intake.receive import accept, arrived
from intake.sources import DocumentPolling, Polling, plugin
from intake.sources.base import Envelope
from intake.sources.lark import DocCursor

log = logging.getLogger(__name__)


def poll(source: Source) -> int:
    """Catch up after downtime through the source's API; the cursor moves only after the
    triggers of everything fetched are stored and processed."""
    plug = plugin(source.kind, source.config, source.secrets)
    if isinstance(plug, DocumentPolling):
        return poll_documents(source, plug)
    if not isinstance(plug, Polling):
        return 0
    cursor = ((source.health.get("cursors") or {}).get("poll") or {}).get("value")
    if not cursor:  # a new source starts from now; history is not replayed
        health.source_cursor_moved(source_id=source.pk, name="poll",
                                   cursor=timezone.now().isoformat())
        return 0
    watching = consumers.of(source).followed_pull_requests(source)
    envs, new_cursor = plug.poll(cursor, watching=watching)
    for env in envs:
        status, _ = accept(source, env, {})
        if status == 202 and Delivery.objects.filter(
            source=source, delivery_id=env.delivery_id, processed_at__isnull=True
        ).exists():
            raise RuntimeError("a polled event is stored but not processed; cursor kept")
    health.source_cursor_moved(source_id=source.pk, name="poll", cursor=new_cursor)
    return len(envs)


def poll_documents(source: Source, plug: DocumentPolling | None = None) -> int:
    """Catch up on the comments of each watched document (Lark), each document with a
    cursor of its own (`doc:<type>:<token>` in the source's health). Each new comment or
    reply is stored and its trigger recorded in one transaction with its document's
    cursor, so the cursor never passes anything unstored; a webhook delivery of the same
    comment made the same trigger id, so the two paths make one trigger. Reading a
    document for anything else (thread context) never touches a cursor. A document that
    fails keeps its cursor and is noted in health; the others go on."""
    plug = plug or plugin(source.kind, source.config, source.secrets)
    if not plug.config.get("doc_comments"):
        return 0
    cursors = (source.health or {}).get("cursors") or {}
    stored = 0
    for file_type, token in plug.documents():
        name = f"doc:{file_type}:{token}"
        if not (cursors.get(name) or {}).get("value"):
            # A newly watched document starts from now; its history is not replayed.
            start = DocCursor(int(timezone.now().timestamp()))
            health.source_cursor_moved(source_id=source.pk, name=name, cursor=start.value(),
                                       extra={"seen": []})
            continue
        try:
            for env, after in plug.poll_document(file_type, token,
                                                 DocCursor.load(cursors[name])):
                _store_polled(source, plug, env, (name, after.value(),
                                                  {"seen": list(after.seen)}))
                stored += 1
        except Exception as exc:
            log.warning("polling comments of %s on %s failed: %s", name, source.slug,
                        type(exc).__name__)
            health.source_event_rejected(source_id=source.pk, reason="doc_poll_failed",
                                         error=True)
    return stored


def _store_polled(source: Source, plug, env: Envelope, cursor: tuple) -> None:
    mailbox = f"{source.slug}:{env.thread}"[:400]
    try:
        process.mailbox_processed(
            source=source, mailbox=mailbox,
            translate=functools.partial(process.translate_stored, plug),
            decide=decide_incoming, arrived=arrived(plug, env, {"x-amux-poll": "doc_comments"}),
            cursor=cursor,
        )
    except process.DuplicateDelivery:  # stored by an earlier poll: only the cursor moves
        health.source_cursor_moved(source_id=source.pk, name=cursor[0], cursor=cursor[1],
                                   extra=cursor[2])


def poll_all() -> int:
    """Poll every enabled source that catches up by polling; one failing source never
    stops the others (its error is kept in its health)."""
    total = 0
    for source in Source.objects.filter(enabled=True):
        if not plugin(source.kind, source.config, source.secrets).catches_up():
            continue
        try:
            total += poll(source)
        except Exception as exc:
            log.warning("polling %s failed: %s", source.slug, type(exc).__name__)
            health.source_event_rejected(source_id=source.pk, reason="poll_failed",
                                         error=True)
    return total
