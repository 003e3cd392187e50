"""Goals as intake's consumer of the Lark sources an agent's Lark Bot connector listens on
(intake/consumers.py): such a source's chat messages enter `goals.ingress.accept`, never
tickets. Registered from goals/wiring.py; called in intake's transaction, so the trigger,
its disposition and the connector's receipt commit together."""

from __future__ import annotations

from django.utils import timezone

from goals import ingress
from goals.core import connectors as ck
from goals.models import Connector
from intake import rules as intake_rules

NOT_A_MESSAGE = "not_a_message"  # a document comment on a connector's source
NO_CONNECTOR = "no_connector"    # a chat no active connector names
NOT_ADMITTED = "not_admitted"    # the policy gate ignored it: nothing is delivered


def _live(source):
    return Connector.objects.filter(source=source, source_kind=ck.LARK_BOT).exclude(
        state="disconnected")


def claims(source) -> bool:
    """A Lark source, not in a conversation mode, that an active Lark Bot connector names.
    A conversation-mode source stays conversations' even if a connector names it (creating
    one is refused; this keeps one source with one consumer if the mode is set later)."""
    return (source.kind == "lark" and not ck.in_conversation_mode(source.config)
            and _live(source).exists())


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


class GoalsConsumer:
    def locate(self, source, result):
        """A chat message stays where it is; anything else on this source — a document
        comment — is no connector input."""
        if intake_rules.is_trigger(result) and not (result.meta or {}).get("message_id"):
            return intake_rules.ignored(NOT_A_MESSAGE)
        return result

    def thread_state_reported(self, source, thread, facts: dict) -> None:
        """A chat thread has no state of its own that a connector follows."""

    def route_new(self, trigger, acceptance: str | None) -> str:
        return message_routed(trigger)

    def followed_pull_requests(self, source) -> list[dict]:
        return []
