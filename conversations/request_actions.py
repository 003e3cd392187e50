"""Card actions that answer a runtime's request: `question.answer`, `question.cancel`
and `permission.answer`. Each reads the request from the timeline by its request id
(the card only names it), answers through the session services — which refuse late,
duplicate and invalid answers — and shows the card answered, inside the callback's one
transaction (card_actions.handle). A sensitive answer appears in no toast, card, log line
or stored outcome."""

from __future__ import annotations

from django.db import transaction

from conversations import actions
from conversations.card_actions import CardAction, Refused, register
from conversations.cards import permission as permission_card
from conversations.cards import question as question_card
from conversations.cards.words import word
from conversations.models import EventCard
from sessions import services
from sessions.models import TimelineEvent

KIND_OF = {"question.asked": "question", "permission.requested": "permission"}


def _request(action: CardAction, event_type: str) -> dict:
    request_id = action.value.get("request")
    if not isinstance(request_id, str) or not request_id:
        raise Refused("unknown_request", word(action.lang, "refused.unknown_request"))
    found = (TimelineEvent.objects.filter(session_id=action.conversation.session_id,
                                          type=event_type, payload__request_id=request_id)
             .order_by("-seq").values_list("payload", flat=True).first())
    if found is None:
        raise Refused("unknown_request", word(action.lang, "refused.unknown_request"))
    card = _event_card(action, request_id, event_type)
    if card is not None and card.state != EventCard.State.OPEN:
        raise Refused("card_closed", word(action.lang, "refused.card_closed"))
    return found


def _event_card(action: CardAction, request_id: str, event_type: str) -> EventCard | None:
    return (EventCard.objects.filter(conversation=action.conversation,
                                     session_id=action.conversation.session_id,
                                     kind=KIND_OF[event_type], request_id=request_id)
            .order_by("-id").first())


def _refused(exc: services.CommandError, lang: str, hidden: bool) -> Refused:
    """The service's refusal in words: late, duplicate or an answer that does not fit."""
    if exc.code in ("not_pending", "already_answered"):
        return Refused(exc.code, word(lang, f"refused.{exc.code}"))
    if hidden:  # the service's words may quote the answer
        return Refused(exc.code, word(lang, "refused.invalid_hidden"))
    return Refused(exc.code, word(lang, "refused.invalid", detail=str(exc)))


def _settle(action: CardAction, asked: str, hidden: bool, answer, value) -> None:
    """The card's row marked answered, then the answer sent through the session service,
    in a savepoint of the callback's transaction: a refusal rolls the row back (and never
    quotes a hidden answer)."""
    with transaction.atomic():
        actions.request_card_answered(action.conversation, KIND_OF[asked],
                                      action.value["request"])
        try:
            answer(action.conversation.session_id, action.value["request"], value)
        except services.CommandError as exc:
            raise _refused(exc, action.lang, hidden) from None


@register("question.answer")
def answer_question(action: CardAction) -> str:
    payload = _request(action, "question.asked")
    hidden = any(q.get("sensitive") for q in question_card.questions_of(payload))
    try:
        answers = question_card.answers_from(payload, action.value, action.form_value)
    except question_card.Incomplete:
        raise Refused("incomplete", word(action.lang, "refused.incomplete")) from None
    _settle(action, "question.asked", hidden, services.answer_question, answers)
    action.show(question_card.answered(payload, lang=action.lang, operator=action.operator,
                                       answers=answers))
    return word(action.lang, "toast.answered")


@register("question.cancel")
def cancel_question(action: CardAction) -> str:
    payload = _request(action, "question.asked")
    _settle(action, "question.asked", True, services.answer_question, None)
    action.show(question_card.answered(payload, lang=action.lang, operator=action.operator,
                                       cancelled=True))
    return word(action.lang, "toast.cancelled")


@register("permission.answer")
def answer_permission(action: CardAction) -> str:
    payload = _request(action, "permission.requested")
    option_id = action.value.get("option")
    option = next((o for o in permission_card.options_of(payload)
                   if str(o["id"]) == option_id), None)
    if option is None:
        raise Refused("invalid", word(action.lang, "refused.invalid_hidden"))
    _settle(action, "permission.requested", False, services.answer_permission,
            str(option["id"]))
    action.show(permission_card.answered(payload, lang=action.lang, option_id=str(option["id"]),
                                         operator=action.operator))
    return word(action.lang, "toast.permission",
                choice=permission_card.choice_label(option, action.lang))
