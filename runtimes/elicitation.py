"""ACP form elicitation (``elicitation/create``) as amux questions, and the answers back as
the form content ACP expects (pure; the ACP adapter does the I/O).

Each property of the requested schema becomes one question (asked as its own request, all
answered together, like Claude's AskUserQuestion): a string ``enum``/``oneOf`` is a choice
(``oneOf`` titles are the labels, their descriptions the option descriptions), a boolean a
Yes/No choice, an ``array`` of enum items a multi-select, any other string, number or
integer a typed answer. A ``format`` of ``password`` (or ``secret``) marks the answer
sensitive: it is sent to the agent and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .answers import AnswerRefused, check_answer
from .events import Question

YES, NO = "Yes", "No"
SENSITIVE_FORMATS = frozenset({"password", "secret"})


@dataclass(frozen=True)
class Field:
    """One schema property: its key in the content, its kind and its question."""

    key: str
    kind: str  # string | choice | boolean | number | integer | multi
    question: Question
    values: dict[str, Any] = field(default_factory=dict)  # option label → content value


def _choices(prop: dict[str, Any]) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """(labels, label → value, label → description) of a string or items schema."""
    if isinstance(prop.get("oneOf") or prop.get("anyOf"), list):
        labels, values, described = [], {}, {}
        for option in prop.get("oneOf") or prop.get("anyOf"):
            if not isinstance(option, dict) or "const" not in option:
                continue
            label = str(option.get("title") or option["const"])
            labels.append(label)
            values[label] = option["const"]
            if option.get("description"):
                described[label] = str(option["description"])
        return labels, values, described
    enum = [str(v) for v in prop.get("enum") or []]
    return enum, {v: v for v in enum}, {}


def fields(message: str, schema: dict[str, Any]) -> list[Field]:
    """The questions of a requested schema (``model_dump(by_alias=True)`` form), in the
    schema's order."""
    props = schema.get("properties") or {}
    out: list[Field] = []
    for index, (key, prop) in enumerate(props.items()):
        if not isinstance(prop, dict):
            continue
        label = str(prop.get("description") or prop.get("title") or "")
        text = message if len(props) == 1 and not label else (
            f"{message}\n\n{label}" if message and label else (label or message or key))
        common = {"text": text, "header": str(prop.get("title") or key), "id": f"q{index}"}
        kind = prop.get("type")
        if kind == "boolean":
            out.append(Field(key, "boolean", Question(options=(YES, NO), allow_custom=False,
                                                      **common), {YES: True, NO: False}))
        elif kind == "array":
            items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
            labels, values, described = _choices(items)
            out.append(Field(key, "multi", Question(
                options=tuple(labels), multi_select=True, allow_custom=not labels,
                descriptions=described or None, **common), values))
        elif kind in ("number", "integer"):
            out.append(Field(key, kind, Question(allow_custom=True, **common)))
        else:
            labels, values, described = _choices(prop)
            sensitive = str(prop.get("format") or "").lower() in SENSITIVE_FORMATS
            out.append(Field(key, "choice" if labels else "string", Question(
                options=tuple(labels), allow_custom=not labels, sensitive=sensitive,
                descriptions=described or None, **common), values))
    return out


def content_value(f: Field, answers: Any) -> Any:
    """One field's content value from ``answers`` ({question id: answer}); raises
    ``AnswerRefused`` (never repeating a sensitive answer) when it does not fit."""
    q = f.question
    chosen = check_answer(q.id or "", q.multi_select, q.options, q.allow_custom, answers,
                          sensitive=q.sensitive)
    if f.kind == "multi":
        return [f.values.get(v, v) for v in chosen]
    if f.kind in ("choice", "boolean"):
        return f.values[chosen]
    if f.kind in ("number", "integer"):
        try:
            return int(chosen) if f.kind == "integer" else float(chosen)
        except ValueError:
            raise AnswerRefused(f"{q.id}: the answer must be a {f.kind}") from None
    return chosen
