"""Card actions: what a click on an amux card does, after it was verified (intake) and
re-checked here.

Every button value carries `{"amux": <kind>, "conversation", "session", "gen", …}`.
Before any handler runs, `handle` checks, in order: the callback is new (a redelivered
event id answers the first outcome and changes nothing), the kind is known, the
conversation exists on this source and still binds that session, `gen` is the
conversation's current output generation (an old card cannot control a replaced session
or output that moved), and the operator may act — the policy gate for this source and the
scope of the conversation's place, with the operator as the actor (who may not ask, may
not answer). A refusal is an error toast naming the reason; nothing is changed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from conversations.cards import language
from conversations.cards.words import word
from conversations.models import CardCallback, Conversation, Mode
from intake.card_hooks import toast
from policy import services as policy_services
from policy.gate import Facts, gate

log = logging.getLogger(__name__)


@dataclass
class CardAction:
    kind: str
    value: dict
    operator: str  # the clicking person's Lark open_id
    source: Any  # intake.models.Source
    conversation: Conversation
    event_id: str
    message_id: str  # the card's Lark message
    form_value: dict = field(default_factory=dict)  # a submitted form's fields
    lang: str = "en"
    card: dict | None = None  # set through `show`: the clicked card is replaced by it

    def show(self, card: dict) -> None:
        """Replace the clicked card by `card` in the callback's answer."""
        self.card = card


class Refused(Exception):  # noqa: N818 — the interface's name (INTERFACES.md)
    """A click that changes nothing: `message` is the toast, in the card's language."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


Handler = Callable[[CardAction], str]
HANDLERS: dict[str, Handler] = {}


def register(kind: str):
    def decorator(fn: Handler) -> Handler:
        if kind in HANDLERS and HANDLERS[kind] is not fn:
            raise ValueError(f"card action {kind!r} is registered twice")
        HANDLERS[kind] = fn
        return fn

    return decorator


def _d(x) -> dict:
    return x if isinstance(x, dict) else {}


def _s(x) -> str:
    return x if isinstance(x, str) else ""


def handle(source, payload: dict) -> dict:
    """One verified `card.action.trigger` → Lark's callback response (registered into
    intake.card_hooks). Idempotent on the event id: the claim of the event, what its
    handler changes and the outcome commit together, in one durable transaction (a
    handler that fails leaves no claim: a redelivery may try again). The one writer of
    CardCallback rows."""
    event_id = _s(_d(payload.get("header")).get("event_id"))
    event = _d(payload.get("event"))
    action = _d(event.get("action"))
    value = _d(action.get("value"))
    operator = _s(_d(event.get("operator")).get("open_id"))
    lang = language(source.config)
    kind = _s(value.get("amux"))[:40]
    if not event_id:  # nothing to make it idempotent by: refused, not acted on
        return toast("error", word(lang, "refused.not_amux"))
    earlier = CardCallback.objects.filter(source=source, event_id=event_id).first()
    if earlier is not None:
        return _answer(earlier.outcome) or toast("info", word(lang, "refused.in_progress"))
    with transaction.atomic(durable=True):
        try:
            with transaction.atomic():
                claim = CardCallback.objects.create(source=source, event_id=event_id[:200],
                                                    kind=kind, operator=operator[:120])
        except IntegrityError:  # the same event twice at once: the first one decided
            earlier = CardCallback.objects.filter(source=source, event_id=event_id).first()
            return _answer(earlier.outcome if earlier else None) or \
                toast("info", word(lang, "refused.in_progress"))
        response = _dispatch(source, event, value, operator, event_id, lang)
        claim.outcome = response
        claim.save(update_fields=["outcome"])
    return _answer(response)


def _answer(outcome: dict | None) -> dict:
    """The callback response of a stored outcome (which also names a refusal's code)."""
    return {k: v for k, v in (outcome or {}).items() if k in ("toast", "card")}


def _dispatch(source, event: dict, value: dict, operator: str, event_id: str,
              lang: str) -> dict:
    context = _d(event.get("context"))
    try:
        conversation = _checked(source, value, operator, _s(context.get("open_chat_id")), lang)
        action = CardAction(kind=value["amux"], value=value, operator=operator, source=source,
                            conversation=conversation, event_id=event_id,
                            message_id=_s(context.get("open_message_id")),
                            form_value=_d(_d(event.get("action")).get("form_value")),
                            lang=lang)
        text = HANDLERS[action.kind](action)
    except Refused as refused:
        log.info("card action %s refused: %s", value.get("amux"), refused.code)
        return {**toast("error", refused.message), "refused": refused.code}
    response = toast("success", text)
    if action.card is not None:
        response["card"] = {"type": "raw", "data": action.card}
    return response


def _checked(source, value: dict, operator: str, chat_id: str, lang: str) -> Conversation:
    def refuse(code: str):
        raise Refused(code, word(lang, f"refused.{code}"))

    kind = value.get("amux")
    ids = [value.get(k) for k in ("conversation", "session", "gen")]
    if not isinstance(kind, str) or not all(isinstance(i, int) and not isinstance(i, bool)
                                            for i in ids):
        refuse("not_amux")
    if kind not in HANDLERS:
        refuse("unknown_action")
    conversation = Conversation.objects.filter(pk=ids[0]).first()
    if conversation is None:
        refuse("no_conversation")
    if conversation.source_id != source.pk:
        refuse("other_source")
    if conversation.session_id != ids[1]:
        refuse("rebound")
    if conversation.generation != ids[2]:
        refuse("stale")
    if not operator_may_act(source, conversation, operator, chat_id):
        refuse("not_allowed")
    return conversation


def place_scopes(conversation: Conversation, chat_id: str, config: dict) -> list[tuple[str, bool]]:
    """The gate rows of the place a conversation lives in, each with whether the source
    receives every message there. A singleton conversation outside the configured groups
    does not know whether the click came from a direct chat or another group: both rows
    must admit the operator."""
    chat = conversation.chat_id or chat_id
    if chat and chat in (config.get("groups") or []):
        return [("group_configured", chat in (config.get("receive_all") or []))]
    if conversation.mode == Mode.TOPIC:
        return [("direct", True)] if not conversation.thread_key else [("group_other", False)]
    return [("direct", True), ("group_other", False)]


def operator_may_act(source, conversation: Conversation, operator: str, chat_id: str) -> bool:
    """Whether the policy would take this person's own request in the conversation's place
    as work (an addressed message from them): who may not ask there, may not answer."""
    config = source.config or {}
    if not operator or operator == config.get("bot_open_id"):
        return False
    policy = policy_services.current_policy({source.slug: source.kind})
    for scope, receives_all in place_scopes(conversation, chat_id, config):
        verdict = gate(Facts(source=source.slug, kind=source.kind, scope=scope, actor=operator,
                             is_human=True, addressed=True, receives_all=receives_all),
                       policy)
        if not verdict.becomes_work:
            return False
    return True
