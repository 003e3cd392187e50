"""The card of a permission request (`permission.requested`): what the runtime wants to
do, and one button per option the runtime offers (allow once, allow always where it has
it, deny), each correlated to the request by its id."""

from __future__ import annotations

from conversations.cards.parts import (
    action_value,
    button,
    card,
    div,
    mention,
    note,
    released_words,
)
from conversations.cards.words import word

STYLE = {"allow_once": "primary", "allow_always": "primary_filled",
         "reject_once": "danger", "reject_always": "danger_filled"}
KINDS = ("allow_once", "allow_always", "reject_once", "reject_always", "cancel")


def options_of(payload: dict) -> list[dict]:
    return [o for o in payload.get("options") or [] if isinstance(o, dict) and o.get("id")]


def choice_label(option: dict, lang: str) -> str:
    """An option in the card's language by its kind; the runtime's label otherwise."""
    kind = option.get("kind")
    if kind in KINDS:
        return word(lang, f"permission.{kind}")
    return str(option.get("label") or option.get("id"))


def _what(payload: dict) -> list[dict]:
    out = []
    if payload.get("title"):
        out.append(div(payload["title"]))
    if payload.get("detail") not in (None, "", {}, []):
        out.append(div(payload["detail"], limit=1500))
    return out


def render(payload: dict, *, conversation_id: int, session_id: int, generation: int,
           lang: str) -> dict:
    request_id = str(payload.get("request_id") or "")
    elements = _what(payload)
    for option in options_of(payload):
        elements.append(button(choice_label(option, lang), action_value(
            "permission.answer", conversation_id=conversation_id, session_id=session_id,
            generation=generation, request=request_id, option=str(option["id"])),
            style=STYLE.get(option.get("kind"), "default"),
            name=f"option_{options_of(payload).index(option)}"))
    return card(word(lang, "permission.title"), "orange", elements)


def answered(payload: dict, *, lang: str, option_id: str | None, operator: str = "") -> dict:
    option = next((o for o in options_of(payload) if str(o["id"]) == option_id),
                  {"id": option_id or "", "kind": "cancel"})
    choice = choice_label(option, lang)
    elements = _what(payload)
    if operator:
        elements.append(note(word(lang, "permission.answered", choice=choice,
                                  who=mention(operator))))
    else:
        elements.append(note(word(lang, "permission.answered_elsewhere", choice=choice)))
    allowed = str(option.get("kind", "")).startswith("allow")
    return card(word(lang, "permission.title"), "green" if allowed else "red", elements)


def released(payload: dict, *, lang: str, reason: str = "") -> dict:
    return card(word(lang, "permission.title"), "grey",
                [*_what(payload), note(released_words(lang, reason))])
