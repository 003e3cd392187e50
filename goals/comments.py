"""Document-comment connectors (``lark_document_comment``) and the source's comment cursor.

A comment reaches an agent's async inbox from the Lark source's document poll (or its
webhook copy completed by the poll): intake captures it, records its trigger, and the
goals consumer routes it to each active connector naming its document. Intake then holds
the comment (intake/acks.py, state ``held``): the document's cursor may not pass it until
the inbox acknowledges it — a settle with no reply (``no_response``), or a reply read back
from Lark (``replied``, or ``reply_gone``). ``acknowledged`` is that hand-back, called in
the transaction that ACKs the inbox event; the cursor moves after the commit, or at the
next poll when a crash came between. Nothing else moves it: not the drain, not the
settle's effect alone, not reading the document's body.

Creating (or reconnecting) such a connector attaches its document to the source: it is
added to the source's watched ``documents`` (with ``doc_comments`` on), so its first poll
catches up a bounded way back and finds comments made before the attachment, and a
webhook copy waits for the polled copy that has the text."""

from __future__ import annotations

import functools
import logging

from django.db import transaction

from goals.core import connectors as ck
from goals.core.lifecycle import Refused
from goals.models import InboxEvent
from intake import acks, source_actions
from intake.record import poll_soon

log = logging.getLogger(__name__)


def acknowledgement(source_id: int, external_id: str) -> str | None:
    """The inbox's answer for one comment trigger
    (goals.core.connectors.comment_acknowledgement)."""
    events = InboxEvent.objects.filter(
        receipt__connector__source_id=source_id,
        receipt__connector__source_kind=ck.DOCUMENT_COMMENT,
        receipt__dedupe_key=external_id).values_list("state", "outcome")
    return ck.comment_acknowledgement(list(events))


def acknowledged(event: InboxEvent) -> None:
    """In the transaction that acknowledged ``event``: when it came from a document-comment
    connector and no other agent's copy of the comment waits, the source's held comment is
    acknowledged with it (its cursor moves after the commit)."""
    receipt = event.receipt
    connector = receipt.connector
    if connector.source_kind != ck.DOCUMENT_COMMENT or connector.source_id is None:
        return
    outcome = acknowledgement(connector.source_id, receipt.dedupe_key)
    if outcome:
        reply = getattr(receipt, "reply", None)
        acks.consumer_acknowledged(connector.source_id, receipt.dedupe_key, outcome,
                                   getattr(reply, "reply_ref", "") or "")


def watch(source, source_ref: str) -> str:
    """Attach a connector's document to its Lark source (the source row locked by the
    caller's transaction): listed in ``documents`` and ``doc_comments`` on. Answers the
    document token the connector keeps as its ``source_ref``. A document newly listed is
    polled soon after the commit: its bounded catch-up runs then."""
    file_type, token = ck.document_ref(source_ref)
    config = dict(source.config or {})
    listed = [d for d in (config.get("documents") or []) if isinstance(d, str)]
    changed = not config.get("doc_comments")
    if not any(d.partition(":")[2] == token for d in listed):
        listed.append(f"{file_type}:{token}")
        changed = True
    if changed:
        # through the sources' one writer, which checks the list as the Lark plugin reads it
        try:
            source_actions.save(source, config={"documents": listed, "doc_comments": True},
                                merge_config=True)
        except source_actions.SourceRefused as refused:
            raise Refused(f"the source cannot watch this document: {refused}",
                          code="invalid", status=400, field="source_ref") from None
        transaction.on_commit(functools.partial(poll_soon, source.pk))
    return token

