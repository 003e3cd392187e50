"""The card of a native question (`question.asked`): its text, option descriptions, the
multi-select, custom-answer and sensitive flags as the payload says, and the controls
that answer it.

One single-select question without a hidden answer gets a button per option (plus a
field for an own answer when allowed); anything else is one form: a dropdown per question
(multi-select where the question takes several) and a text field for an own answer, a
password-style field when the answer is sensitive. Field names are `q<i>_pick` and
`q<i>_text` for the i-th question; `answers_from` reads them back."""

from __future__ import annotations

from typing import Any

from conversations.cards.parts import (
    action_value,
    button,
    card,
    clip,
    div,
    mention,
    note,
    released_words,
)
from conversations.cards.words import word

FORM = "answer"


class Incomplete(ValueError):
    """A question of the card was left without an answer."""


def questions_of(payload: dict) -> list[dict]:
    return [q for q in payload.get("questions") or [] if isinstance(q, dict)]


def _buttons_only(questions: list[dict]) -> bool:
    if len(questions) != 1:
        return False
    q = questions[0]
    return bool(q.get("options")) and not q.get("multi_select") and not q.get("sensitive")


def _describe(q: dict, lang: str, many: bool) -> list[dict]:
    out = []
    text = q.get("text") or ""
    if many and q.get("header"):
        text = f"{q['header']}: {text}"
    out.append(div(text))
    descriptions = q.get("descriptions") or {}
    lines = [f"• {label} — {descriptions[label]}" for label in q.get("options") or []
             if isinstance(descriptions, dict) and descriptions.get(label)]
    if lines:
        out.append(div("\n".join(lines)))
    flags = []
    if q.get("multi_select"):
        flags.append(word(lang, "question.multi"))
    if q.get("allow_custom", True) and q.get("options"):
        flags.append(word(lang, "question.custom"))
    if q.get("sensitive"):
        flags.append(word(lang, "question.sensitive"))
    if flags:
        out.append(note(" ".join(flags)))
    return out


def _options(q: dict) -> list[dict]:
    return [{"text": {"tag": "plain_text", "content": clip(label, 100)}, "value": str(i)}
            for i, label in enumerate(q.get("options") or [])]


def _fields(i: int, q: dict, lang: str) -> list[dict]:
    out = []
    if q.get("options"):
        tag = "multi_select_static" if q.get("multi_select") else "select_static"
        key = "question.pick_many" if q.get("multi_select") else "question.pick"
        out.append({"tag": tag, "name": f"q{i}_pick", "options": _options(q),
                    "placeholder": {"tag": "plain_text", "content": word(lang, key)}})
    if q.get("allow_custom", True) or not q.get("options"):
        field = {"tag": "input", "name": f"q{i}_text", "max_length": 1000,
                 "placeholder": {"tag": "plain_text", "content": word(
                     lang, "question.secret" if q.get("sensitive") else "question.own")}}
        if q.get("sensitive"):
            field["input_type"] = "password"
        out.append(field)
    return out


def render(payload: dict, *, conversation_id: int, session_id: int, generation: int,
           lang: str) -> dict:
    questions = questions_of(payload)
    request_id = str(payload.get("request_id") or "")
    ids = {"conversation_id": conversation_id, "session_id": session_id,
           "generation": generation}
    many = len(questions) > 1
    title = (questions[0].get("header") if not many and questions else None) or \
        word(lang, "question.title")
    elements: list[dict] = []
    if payload.get("blocking") is False or payload.get("delivery") == "async":
        elements.append(note(word(lang, "question.async")))
    for q in questions:
        elements += _describe(q, lang, many)
    if _buttons_only(questions):
        q = questions[0]
        for i, label in enumerate(q["options"]):
            elements.append(button(label, action_value(
                "question.answer", request=request_id, question=q.get("id"), option=i, **ids),
                style="primary" if i == 0 else "default", name=f"option_{i}"))
        if q.get("allow_custom", True):
            elements.append(_form([{"tag": "input", "name": "q0_text", "max_length": 1000,
                                    "placeholder": {"tag": "plain_text",
                                                    "content": word(lang, "question.own")}}],
                                  request_id, ids, lang))
    else:
        fields = [f for i, q in enumerate(questions) for f in _fields(i, q, lang)]
        elements.append(_form(fields, request_id, ids, lang))
    elements.append(button(word(lang, "question.cancel"), action_value(
        "question.cancel", request=request_id, **ids), style="danger", name="cancel"))
    return card(title, "blue", elements)


def _form(fields: list[dict], request_id: str, ids: dict, lang: str) -> dict:
    submit = button(word(lang, "question.send"),
                    action_value("question.answer", request=request_id, form=True, **ids),
                    style="primary", name="send", submit=True)
    return {"tag": "form", "name": FORM, "elements": [*fields, submit]}


def answers_from(payload: dict, value: dict, form_value: dict | None) -> dict[str, Any]:
    """The answers a click or a form submission gives, as `answer_question` takes them
    (question id → label, own text, or a list of labels). Raises `Incomplete` when a
    question is left unanswered; whether an answer fits is the service's to say."""
    questions = questions_of(payload)
    form = form_value if isinstance(form_value, dict) else {}
    answers: dict[str, Any] = {}
    if not value.get("form") and "option" in value:
        q = next((q for q in questions if q.get("id") == value.get("question")), None)
        options = (q or {}).get("options") or []
        index = value.get("option")
        if q is None or not isinstance(index, int) or not 0 <= index < len(options):
            raise Incomplete("the option is not one of the question's")
        return {str(q["id"]): options[index]}
    for i, q in enumerate(questions):
        if not q.get("id"):
            continue
        options = q.get("options") or []
        picks = form.get(f"q{i}_pick")
        picks = [picks] if isinstance(picks, str) else picks if isinstance(picks, list) else []
        labels = [options[int(p)] for p in picks
                  if isinstance(p, str) and p.isdigit() and int(p) < len(options)]
        text = form.get(f"q{i}_text")
        text = text.strip() if isinstance(text, str) else ""
        if q.get("multi_select"):
            chosen = labels + ([text] if text else [])
            if chosen:
                answers[str(q["id"])] = chosen
        elif text or labels:
            answers[str(q["id"])] = text or labels[0]
        if str(q["id"]) not in answers:
            raise Incomplete(f"question {i + 1} has no answer")
    return answers


def _shown(answer: Any) -> str:
    return ", ".join(answer) if isinstance(answer, list) else str(answer)


def answered(payload: dict, *, lang: str, operator: str = "",
             answers: dict[str, Any] | None = None, cancelled: bool = False) -> dict:
    """The card once answered (or cancelled): the question stays readable, no control is
    left. A sensitive answer is never shown."""
    questions = questions_of(payload)
    many = len(questions) > 1
    elements = [div(f"{q['header']}: {q.get('text') or ''}" if many and q.get("header")
                    else q.get("text") or "") for q in questions]
    if not cancelled and answers:
        for q in questions:
            if q.get("id") in answers and not q.get("sensitive"):
                elements.append(div(word(lang, "question.answer_was",
                                         answer=_shown(answers[q["id"]]))))
    who = mention(operator)
    if cancelled:
        elements.append(note(word(lang, "question.cancelled", who=who)))
    elif operator:
        elements.append(note(word(lang, "question.answered", who=who)))
    else:
        elements.append(note(word(lang, "question.answered_elsewhere")))
    title = (questions[0].get("header") if not many and questions else None) or \
        word(lang, "question.title")
    return card(title, "grey" if cancelled else "green", elements)


def released(payload: dict, *, lang: str, reason: str = "") -> dict:
    """The card of a question no one can answer any more (its turn ended, the session was
    interrupted or closed, or the card went stale): inert, nothing to click."""
    questions = questions_of(payload)
    many = len(questions) > 1
    elements = [div(f"{q['header']}: {q.get('text') or ''}" if many and q.get("header")
                    else q.get("text") or "") for q in questions]
    elements.append(note(released_words(lang, reason)))
    title = (questions[0].get("header") if not many and questions else None) or \
        word(lang, "question.title")
    return card(title, "grey", elements)
