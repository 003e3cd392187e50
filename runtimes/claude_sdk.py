"""Pure mapping between the Claude Agent SDK's messages and amux's typed events.

No I/O: the adapter (``claude.py``) feeds SDK messages in and sends what this returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import answers as answers_mod
from .answers import AnswerRefused
from .events import (
    Event,
    MessageCompleted,
    MessageDelta,
    Question,
    Reasoning,
    ToolCompleted,
    ToolStarted,
    TurnCompleted,
    TurnFailed,
    UsageObserved,
)

ASK_USER_QUESTION = "AskUserQuestion"
__all__ = ["ASK_USER_QUESTION", "AnswerRefused", "MessageMapper", "check_answer",
           "native_answers", "result_terminal", "result_usage", "split_questions",
           "usage_fields"]


def usage_fields(usage: Any) -> dict[str, int] | None:
    """The Anthropic usage object as amux's snake_case fields (only what was reported)."""
    if not isinstance(usage, dict):
        return None
    names = {"input_tokens": "input_tokens", "output_tokens": "output_tokens",
             "cache_read_input_tokens": "cached_input_tokens",
             "cache_creation_input_tokens": "cache_creation_input_tokens"}
    out = {new: int(usage[old]) for old, new in names.items()
           if isinstance(usage.get(old), int | float) and not isinstance(usage.get(old), bool)}
    thinking = (usage.get("output_tokens_details") or {}).get("thinking_tokens") \
        if isinstance(usage.get("output_tokens_details"), dict) else None
    if isinstance(thinking, int) and thinking:
        out["reasoning_output_tokens"] = thinking
    return out or None


def result_terminal(result: dict[str, Any]) -> Event:
    """Seed 000: a result with ``is_error`` or a subtype other than ``success`` fails the
    turn, keeping the reported error."""
    subtype = result.get("subtype")
    if result.get("is_error") or subtype != "success":
        errors = [str(e) for e in result.get("errors") or [] if e]
        message = "; ".join(errors) or str(result.get("result") or subtype or "error")
        return TurnFailed(code=f"claude_{subtype}" if subtype and subtype != "success"
                          else "claude_error", message=message)
    return TurnCompleted(stop_reason=result.get("stop_reason") or "end_turn")


@dataclass
class MessageMapper:
    """One turn's SDK messages → events. Only the main thread (no ``parent_tool_use_id``)
    speaks for the turn: a sub-agent's words stay inside its tool call."""

    streamed: set[str] = field(default_factory=set)  # message ids whose text streamed
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)

    def events(self, msg: dict[str, Any]) -> Iterator[Event]:
        kind = msg.get("type")
        if msg.get("parent_tool_use_id"):
            return
        if kind == "stream_event":
            ev = msg.get("event") or {}
            delta = ev.get("delta") or {}
            if ev.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                mid = self._stream_id(msg)
                if mid:
                    self.streamed.add(mid)
                yield MessageDelta(text=delta.get("text", ""), item_id=mid)
        elif kind == "assistant":
            message = msg.get("message") or {}
            mid = message.get("id")
            for block in message.get("content") or []:
                btype = block.get("type")
                if btype == "text" and block.get("text"):
                    yield MessageCompleted(text=block["text"], item_id=mid)
                elif btype == "thinking" and block.get("thinking"):
                    yield Reasoning(text=block["thinking"], item_id=mid)
                elif btype == "tool_use":
                    call_id = block.get("id", "")
                    self.tools[call_id] = {"name": block.get("name"),
                                           "input": block.get("input")}
                    yield ToolStarted(call_id=call_id, kind=block.get("name"),
                                      title=_tool_title(block.get("name"), block.get("input")),
                                      input=block.get("input"))
            last = usage_fields(message.get("usage"))
            if last:
                yield UsageObserved(last=last)
        elif kind == "user":
            content = (msg.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield ToolCompleted(call_id=block.get("tool_use_id", ""),
                                        status="failed" if block.get("is_error")
                                        else "completed",
                                        output=_result_text(block.get("content")))

    @staticmethod
    def _stream_id(msg: dict[str, Any]) -> str | None:
        ev = msg.get("event") or {}
        message = ev.get("message") if isinstance(ev.get("message"), dict) else None
        return message.get("id") if message else None


def result_usage(result: dict[str, Any]) -> UsageObserved | None:
    """The turn's result: cumulative model usage (the SDK's running totals across turns,
    as reported) and its cost estimate."""
    cumulative: dict[str, int] = {}
    for stats in (result.get("modelUsage") or {}).values():
        if not isinstance(stats, dict):
            continue
        for old, new in (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens"),
                         ("cacheReadInputTokens", "cached_input_tokens"),
                         ("cacheCreationInputTokens", "cache_creation_input_tokens")):
            value = stats.get(old)
            if isinstance(value, int | float) and not isinstance(value, bool):
                key = f"cumulative_{new}"
                cumulative[key] = cumulative.get(key, 0) + int(value)
    window = None
    for stats in (result.get("modelUsage") or {}).values():
        if isinstance(stats, dict) and isinstance(stats.get("contextWindow"), int):
            window = stats["contextWindow"]
    cost = result.get("total_cost_usd")
    cost_obj = {"amount": cost, "currency": "USD", "estimate": True} \
        if isinstance(cost, int | float) else None
    if not cumulative and cost_obj is None:
        return None
    return UsageObserved(cumulative=cumulative or None, context_window=window, cost=cost_obj)


def _tool_title(name: Any, tool_input: Any) -> str | None:
    if isinstance(tool_input, dict):
        for key in ("command", "file_path", "pattern", "url", "description"):
            if isinstance(tool_input.get(key), str):
                return tool_input[key]
    return name if isinstance(name, str) else None


def _result_text(content: Any) -> Any:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [c.get("text", "") for c in content
                 if isinstance(c, dict) and c.get("type") == "text"]
        return "".join(texts) if texts else content
    return content


# --------------------------------------------------------------------- AskUserQuestion
def split_questions(tool_input: dict[str, Any]) -> list[Question]:
    """AskUserQuestion's ``questions`` as one amux ``Question`` each (id = its index)."""
    out = []
    for i, q in enumerate(tool_input.get("questions") or []):
        if not isinstance(q, dict):
            continue
        described = [o for o in q.get("options") or [] if isinstance(o, dict)]
        options = tuple(str(o.get("label", "")) for o in described)
        descriptions = {str(o["label"]): str(o["description"]) for o in described
                        if o.get("label") and o.get("description")}
        out.append(Question(text=str(q.get("question", "")), header=q.get("header"),
                            id=f"q{i}", options=options, descriptions=descriptions or None,
                            multi_select=bool(q.get("multiSelect")), allow_custom=True))
    return out


def check_answer(question: Question, answers: Any) -> str | list[str]:
    """One question's answer from ``answers`` (``{question id: answer}``)."""
    return answers_mod.check_answer(question.id or "", question.multi_select,
                                    question.options, question.allow_custom, answers,
                                    sensitive=question.sensitive)


def native_answers(tool_input: dict[str, Any], questions: list[Question],
                   answers: list[str | list[str]]) -> dict[str, Any]:
    """``updatedInput`` for AskUserQuestion: the original ``questions`` and ``answers``
    keyed by question text; a multi-select answer keeps its label array."""
    return {**tool_input, "questions": tool_input.get("questions"),
            "answers": {q.text: a for q, a in zip(questions, answers, strict=True)}}
