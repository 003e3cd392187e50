"""Whether an answer fits its question (pure; used by the adapters and the API path)."""

from __future__ import annotations

from typing import Any


class AnswerRefused(ValueError):
    """An answer that does not fit its question (the question id is in the message)."""


def check_answer(qid: str, multi_select: bool, options: tuple[str, ...] | list[str],
                 allow_custom: bool, answers: Any, sensitive: bool = False) -> str | list[str]:
    """The answer to question ``qid`` in ``answers`` (``{question id: answer}``): one label
    (or the user's own text when custom answers are allowed), or for a multi-select
    question a non-empty list of labels. Raises ``AnswerRefused`` otherwise; its message
    never repeats what was answered to a ``sensitive`` question."""
    if not isinstance(answers, dict) or qid not in answers:
        raise AnswerRefused(f"answers must hold {qid!r}")
    value = answers[qid]
    if multi_select:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or \
                not all(isinstance(v, str) and v.strip() for v in value):
            raise AnswerRefused(f"{qid}: a multi-select answer is a list of labels")
        chosen: list[str] = list(value)
    else:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, str) or not value.strip():
            raise AnswerRefused(f"{qid}: the answer is one label or text")
        chosen = [value]
    if options and not allow_custom:
        unknown = [v for v in chosen if v not in options]
        if unknown:
            shown = "the answer" if sensitive else repr(unknown[0])
            raise AnswerRefused(f"{qid}: {shown} is not one of {list(options)}")
    return chosen if multi_select else chosen[0]


def check_payload_answers(questions: list[dict[str, Any]], answers: Any) -> None:
    """Every question of a ``question.asked`` payload that has an id is answered and each
    answer fits (the timeline's view of the request)."""
    for q in questions:
        if isinstance(q, dict) and q.get("id"):
            check_answer(str(q["id"]), bool(q.get("multi_select")),
                         tuple(q.get("options") or ()), bool(q.get("allow_custom", True)),
                         answers, sensitive=bool(q.get("sensitive")))


def as_input_text(questions: list[dict[str, Any]], answers: dict[str, Any]) -> str:
    """An async question's answer as the ordinary input it enters the session as: each
    question quoted, then what was answered (a multi-select's labels joined)."""
    blocks = []
    for q in questions:
        if not isinstance(q, dict) or q.get("id") not in answers:
            continue
        value = answers[q["id"]]
        chosen = ", ".join(value) if isinstance(value, list) else str(value)
        quoted = "\n".join(f"> {line}" for line in str(q.get("text", "")).splitlines())
        blocks.append(f"{quoted}\n\n{chosen}")
    return "\n\n".join(blocks)
