"""Goals as intake's consumer of the Lark sources an agent's Lark Bot or document-comment
connector listens on (intake/consumers.py): such a source's chat messages and document
comments enter `goals.ingress.accept`, never tickets. A comment the inbox takes is held by
intake until the inbox acknowledges it (`acknowledgement`, goals/comments.py). Registered
from goals/wiring.py; called in intake's transaction, so the trigger, its disposition and
the connector's receipt commit together."""

from __future__ import annotations

from django.utils import timezone

from goals import comments, ingress
from goals.core import connectors as ck
from goals.models import Connector
from intake import rules as intake_rules

NOT_A_MESSAGE = "not_a_message"  # a document comment on a connector's source
NO_CONNECTOR = "no_connector"    # a chat no active connector names
NOT_ADMITTED = "not_admitted"    # the policy gate ignored it: nothing is delivered


def _live(source, kind=ck.LARK_BOT):
    return Connector.objects.filter(source=source, source_kind=kind).exclude(
        state="disconnected")


def claims(source) -> bool:
    """A Lark source, not in a conversation mode, that an active Lark Bot or
    document-comment connector names.
    A conversation-mode source stays conversations' even if a connector names it (creating
    one is refused; this keeps one source with one consumer if the mode is set later)."""
    return (source.kind == "lark" and not ck.in_conversation_mode(source.config)
            and Connector.objects.filter(
                source=source, source_kind__in=(ck.LARK_BOT, ck.DOCUMENT_COMMENT)).exclude(
                state="disconnected").exists())


def event_of(trigger) -> ingress.Event:
    meta = trigger.meta or {}
    # `addressed` is the verified mention of this app's bot (intake/sources/lark.py); a
    # direct chat counts as addressed but is no mention
    mention = trigger.addressed and meta.get("scope") != "direct"
    return ingress.Event(
        dedupe_key=meta["message_id"], kind="mention" if mention else "message",
        text=trigger.text or "", actor=trigger.actor or "", addressed=trigger.addressed,
        thread=meta.get("thread_id") or meta.get("root_id") or "", at=timezone.now(),
        place=meta.get("chat_id") or "",
        origin={"source": trigger.source.slug, "trigger_external_id": trigger.external_id})


def _disposed(trigger, disposition: str, ingress_meta) -> str:
    trigger.disposition = disposition
    trigger.meta = {**(trigger.meta or {}), "ingress": ingress_meta}
    trigger.save(force_insert=True)
    return disposition


def message_routed(trigger) -> str:
    """Each active connector naming the message's chat takes it (one receipt each); the
    trigger's disposition is the receipt's outcome (`delivered` if any connector's was).
    Nothing is accepted for a trigger the gate ignored or a chat no connector names."""
    meta = trigger.meta or {}
    if not meta.get("message_id"):
        return _disposed(trigger, "ignored", {"reason": NOT_A_MESSAGE})
    if (trigger.decision or "ignore") == "ignore":
        return _disposed(trigger, "not_accepted", {"reason": NOT_ADMITTED})
    connectors = list(_live(trigger.source).filter(source_ref=meta.get("chat_id") or ""))
    if not connectors:
        return _disposed(trigger, "ignored", {"reason": NO_CONNECTOR})
    event = event_of(trigger)
    receipts = [ingress.accept(connector, event) for connector in connectors]
    outcomes = [r.outcome for r in receipts]
    return _disposed(trigger, "delivered" if "delivered" in outcomes else outcomes[0],
                     {"receipts": [{"connector": r.connector_id, "receipt": r.pk,
                                    "outcome": r.outcome, "reason": r.reason}
                                   for r in receipts]})


def comment_event_of(trigger) -> ingress.Event:
    meta = trigger.meta or {}
    token = meta.get("file_token") or ""
    return ingress.Event(
        dedupe_key=trigger.external_id, kind="mention" if trigger.addressed else "message",
        text=trigger.text or "", actor=trigger.actor or "", addressed=trigger.addressed,
        thread=f"doc:{token}:{meta.get('comment_id') or ''}", at=timezone.now(),
        place=token,
        origin={"source": trigger.source.slug, "trigger_external_id": trigger.external_id})


def comment_routed(trigger) -> str:
    """Each active document-comment connector naming the comment's document takes it (one
    receipt each), as a message is routed; a document no connector names is ignored."""
    if (trigger.decision or "ignore") == "ignore":
        return _disposed(trigger, "not_accepted", {"reason": NOT_ADMITTED})
    token = (trigger.meta or {}).get("file_token") or ""
    connectors = list(_live(trigger.source, ck.DOCUMENT_COMMENT).filter(source_ref=token))
    if not token or not connectors:
        return _disposed(trigger, "ignored", {"reason": NO_CONNECTOR})
    event = comment_event_of(trigger)
    receipts = [ingress.accept(connector, event) for connector in connectors]
    outcomes = [r.outcome for r in receipts]
    return _disposed(trigger, "delivered" if "delivered" in outcomes else outcomes[0],
                     {"receipts": [{"connector": r.connector_id, "receipt": r.pk,
                                    "outcome": r.outcome, "reason": r.reason}
                                   for r in receipts]})


def _is_comment(result) -> bool:
    return (getattr(result, "meta", None) or {}).get("scope") == "doc_comment"


class GoalsConsumer:
    def locate(self, source, result):
        """A chat message or a document comment stays where it is; anything else is no
        connector input."""
        if (intake_rules.is_trigger(result) and not (result.meta or {}).get("message_id")
                and not _is_comment(result)):
            return intake_rules.ignored(NOT_A_MESSAGE)
        return result

    def thread_state_reported(self, source, thread, facts: dict) -> None:
        """A chat thread has no state of its own that a connector follows."""

    def route_new(self, trigger, acceptance: str | None) -> str:
        if _is_comment(trigger):
            return comment_routed(trigger)
        return message_routed(trigger)

    def acknowledgement(self, trigger) -> str | None:
        """Intake asks whether the inbox holds a comment trigger (intake/acks.py): None
        when it became no inbox event, "" while one waits for its ACK, else the outcome."""
        if not _is_comment(trigger):
            return None
        return comments.acknowledgement(trigger.source_id, trigger.external_id)

    def followed_pull_requests(self, source) -> list[dict]:
        return []

    def followed_chats(self, source) -> list[str]:
        """The chat each active Lark Bot connection on `source` names: its history is caught
        up after downtime (intake/poll.py), like the source's configured groups."""
        return sorted(set(_live(source).values_list("source_ref", flat=True)) - {""})
