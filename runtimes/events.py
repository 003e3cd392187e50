"""Typed runtime events: what an adapter reports about one turn.

Adapters emit these; the canonical timeline (``sessions/timeline.py``) assigns turn identity
and order and keeps exactly one terminal per turn. Pure Python, no Django.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"
    terminal: ClassVar[bool] = False

    def payload(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class TurnStarted(Event):
    type: ClassVar[str] = "turn.started"
    native_turn_id: str | None = None


@dataclass(frozen=True)
class MessageDelta(Event):
    type: ClassVar[str] = "message.delta"
    text: str = ""
    item_id: str | None = None


@dataclass(frozen=True)
class MessageCompleted(Event):
    type: ClassVar[str] = "message.completed"
    text: str = ""
    item_id: str | None = None


@dataclass(frozen=True)
class Reasoning(Event):
    type: ClassVar[str] = "reasoning"
    text: str = ""
    item_id: str | None = None


@dataclass(frozen=True)
class ToolStarted(Event):
    type: ClassVar[str] = "tool.started"
    call_id: str = ""
    kind: str | None = None
    title: str | None = None
    input: Any = None


@dataclass(frozen=True)
class ToolUpdated(Event):
    type: ClassVar[str] = "tool.updated"
    call_id: str = ""
    status: str | None = None
    output: Any = None


@dataclass(frozen=True)
class ToolCompleted(Event):
    type: ClassVar[str] = "tool.completed"
    call_id: str = ""
    status: str = "completed"  # completed | failed | declined
    output: Any = None
    exit_code: int | None = None


@dataclass(frozen=True)
class PermissionOption:
    id: str
    label: str
    kind: str  # allow_once | allow_always | reject_once | reject_always | cancel


@dataclass(frozen=True)
class PermissionRequested(Event):
    type: ClassVar[str] = "permission.requested"
    request_id: str = ""
    call_id: str | None = None
    title: str | None = None
    detail: Any = None
    options: tuple[PermissionOption, ...] = ()


@dataclass(frozen=True)
class PermissionAnswered(Event):
    type: ClassVar[str] = "permission.answered"
    request_id: str = ""
    option_id: str | None = None  # None = cancelled


@dataclass(frozen=True)
class Question:
    text: str
    options: tuple[str, ...] = ()
    multi_select: bool = False
    allow_custom: bool = True
    sensitive: bool = False  # the answer is a secret: never echoed, logged or stored
    header: str | None = None
    id: str | None = None
    # {option label: what it means}, only where the runtime describes its options
    descriptions: dict[str, str] | None = None


@dataclass(frozen=True)
class QuestionAsked(Event):
    """A native question. ``blocking``: the runtime's own flag (a native non-blocking
    request is still answerable only while its turn runs). ``delivery="async"``: no native
    request waits at all (Codex ``request_user_input_async``); the answer enters the session
    as an ordinary input, whenever it comes."""

    type: ClassVar[str] = "question.asked"
    request_id: str = ""
    questions: tuple[Question, ...] = ()
    blocking: bool = True
    delivery: str | None = None

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        out["questions"] = [{k: v for k, v in q.items()
                             if k != "descriptions" or v} for q in out["questions"]]
        return out


@dataclass(frozen=True)
class QuestionAnswered(Event):
    """A question was answered (the answer itself stays out of the timeline)."""

    type: ClassVar[str] = "question.answered"
    request_id: str = ""


@dataclass(frozen=True)
class UsageObserved(Event):
    """Usage exactly as the runtime reported it: ``last`` (the latest model call) and,
    when the runtime reports one, its own ``cumulative`` snapshot. Never summed or derived."""

    type: ClassVar[str] = "usage.observed"
    last: dict[str, int] | None = None
    cumulative: dict[str, int] | None = None
    context_window: int | None = None
    context_used: int | None = None
    cost: dict[str, Any] | None = None


@dataclass(frozen=True)
class ErrorObserved(Event):
    type: ClassVar[str] = "error"
    code: str = "runtime_error"
    message: str = ""
    will_retry: bool = False


@dataclass(frozen=True)
class TurnCompleted(Event):
    type: ClassVar[str] = "turn.completed"
    terminal: ClassVar[bool] = True
    stop_reason: str | None = None


@dataclass(frozen=True)
class TurnFailed(Event):
    type: ClassVar[str] = "turn.failed"
    terminal: ClassVar[bool] = True
    code: str = "runtime_error"
    message: str = ""


@dataclass(frozen=True)
class TurnCancelled(Event):
    type: ClassVar[str] = "turn.cancelled"
    terminal: ClassVar[bool] = True
    reason: str = "interrupted"


TERMINAL_TYPES = frozenset({TurnCompleted.type, TurnFailed.type, TurnCancelled.type})

EVENT_TYPES = frozenset(
    cls.type for cls in (TurnStarted, MessageDelta, MessageCompleted, Reasoning, ToolStarted,
                         ToolUpdated, ToolCompleted, PermissionRequested, PermissionAnswered,
                         QuestionAsked, QuestionAnswered, UsageObserved, ErrorObserved,
                         TurnCompleted, TurnFailed, TurnCancelled)
)


@dataclass
class TurnInput:
    """One user input for one turn. ``images`` are ``(mime_type, base64 data)`` pairs."""

    text: str
    images: list[tuple[str, str]] = field(default_factory=list)
    # the system prompt for every model request of this turn (None: amux sets none)
    system_prompt: str | None = None
    # the message's parts in order: ("text", text) or ("image", mime_type, base64 data);
    # empty for a text-only input (``text`` and ``images`` then say it all)
    parts: list[tuple[str, ...]] = field(default_factory=list)
    # a runtime control run as a turn instead of a message: "compact"
    command: str | None = None

    def ordered(self) -> list[tuple[str, ...]]:
        """The content in order: the parts, or the text followed by the images."""
        if self.parts:
            return list(self.parts)
        return [("text", self.text), *(("image", m, d) for m, d in self.images)]
