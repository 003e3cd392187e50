"""Triage of an inferred candidate: one structured model call through the configured
provider (OpenAI-compatible Chat Completions), answering accept / decline / needs a person
with a routing note of at most 30 words that names the work, never a plan."""

from __future__ import annotations

from dataclasses import dataclass

from amux_common import bounded_json
from prompts_app.contract import ROUTING_NOTE_MAX_WORDS, clip_routing_note
from tickets.models import AgentSettings, Eval

RESULTS = ("accept", "decline", "needs_person")

SCHEMA = {
    "type": "object",
    "properties": {
        "result": {"type": "string", "enum": list(RESULTS)},
        "note": {"type": "string"},
    },
    "required": ["result", "note"],
    "additionalProperties": False,
}

# The contract of the answer's shape stays in code (tool and card formats are not prompts).
ANSWER_FORMAT = (
    'Answer with JSON only: {"result": "accept" | "decline" | "needs_person", '
    f'"note": "<at most {ROUTING_NOTE_MAX_WORDS} words naming the work, no plan>"}}.'
)


class TriageUnavailable(RuntimeError):
    """No triage model is configured: the candidate needs a person."""


@dataclass(frozen=True)
class Verdict:
    result: str
    note: str


def parse(content: str) -> Verdict:
    """Read the model's answer; anything malformed is a person's call, not a guess."""
    try:
        data = bounded_json.loads(content.strip().removeprefix("```json").removesuffix("```"))
    except (ValueError, AttributeError):
        return Verdict("needs_person", "The triage answer was not readable.")
    result = data.get("result") if isinstance(data, dict) else None
    if result not in RESULTS:
        return Verdict("needs_person", "The triage answer had no valid result.")
    return Verdict(result, clip_routing_note(data.get("note", "")))


CONTEXT_CHARS = 6000  # the thread's messages triage reads, newest kept first
MESSAGE_CHARS = 1500  # of one message


def context_text(messages: list[dict], limit: int = CONTEXT_CHARS) -> str:
    """The thread's messages for the triage model, oldest first, within ``limit``
    characters: the newest are kept whole (each clipped to MESSAGE_CHARS), the oldest
    dropped first, and the text says how many were left out."""
    lines: list[str] = []
    used = 0
    for item in reversed(messages):
        text = " ".join(str(item.get("text") or "").split())
        if len(text) > MESSAGE_CHARS:
            text = text[:MESSAGE_CHARS] + "…"
        line = f"- {item.get('author') or '?'} ({item.get('at') or 'unknown time'}): {text}"
        if used + len(line) > limit:
            break
        lines.append(line)
        used += len(line) + 1
    left_out = len(messages) - len(lines)
    head = [f"({left_out} earlier messages left out)"] if left_out else []
    return "\n".join(head + lines[::-1])


def candidate_text(evaluation: Eval, context: str = "") -> str:
    trigger = evaluation.trigger
    lines = [
        f"Source: {trigger.source.slug} ({trigger.source.kind}); scope: {trigger.scope}",
        f"Thread: {trigger.thread.key} {trigger.thread.title}".rstrip(),
        f"From: {trigger.actor}{' (bot)' if trigger.is_bot else ''}",
        "Message:",
        trigger.text or "(no text)",
    ]
    if context:
        lines += ["", "Thread context:", context]
    return "\n".join(lines)


def assess(evaluation: Eval, *, system_prompt: str, context: str = "",
           idempotency_key: str = "") -> Verdict:
    """Ask the configured triage model about one candidate."""
    from openai import OpenAI

    settings = AgentSettings.current()
    provider = settings.triage_provider
    if provider is None or not settings.triage_model:
        raise TriageUnavailable("no triage provider and model are configured")
    client = OpenAI(
        base_url=provider.base_url,
        api_key=(provider.secrets or {}).get("api_key") or "unset",
        max_retries=0,
        timeout=120,
    )
    response = client.chat.completions.create(
        model=settings.triage_model,
        messages=[
            {"role": "system", "content": f"{system_prompt}\n\n{ANSWER_FORMAT}".strip()},
            {"role": "user", "content": candidate_text(evaluation, context)},
        ],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "triage", "schema": SCHEMA, "strict": True},
        },
        extra_headers={"Idempotency-Key": idempotency_key} if idempotency_key else None,
    )
    return parse(response.choices[0].message.content or "")
