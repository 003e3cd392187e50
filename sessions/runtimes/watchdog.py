"""Turn watchdogs as pure logic (no I/O, the clock is passed in).

Seed 000: turn hard cap default 21600 s, 0 disables, negative means default, at most 7 days;
turn idle timeout is a separate limit; the repeated identical tool call limit defaults to 50,
0 disables, negative means default, at most 1000, and ends the turn failed with
``code=repeat_tool_loop``. Identical calls are counted once per distinct started (Codex) or
completed (ACP) native call; repeated frames of the same call do not add; a different call or
a new turn resets the count; a changed result does not reset it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TURN_HARD_CAP = 21600
MAX_TURN_HARD_CAP = 7 * 24 * 3600
DEFAULT_TURN_IDLE_TIMEOUT = 1800
DEFAULT_REPEAT_TOOL_CALL_LIMIT = 50
MAX_REPEAT_TOOL_CALL_LIMIT = 1000

REPEAT_TOOL_LOOP = "repeat_tool_loop"
TURN_HARD_CAP = "turn_hard_cap"
TURN_IDLE_TIMEOUT = "turn_idle_timeout"


def _normalize(value: int | float | None, default: int, maximum: int) -> int:
    """0 disables (returns 0), None/negative → default, otherwise clamped to ``maximum``."""
    if value is None:
        return default
    value = int(value)
    if value < 0:
        return default
    return min(value, maximum)


def normalize_hard_cap(value: int | float | None) -> int:
    return _normalize(value, DEFAULT_TURN_HARD_CAP, MAX_TURN_HARD_CAP)


def normalize_idle_timeout(value: int | float | None) -> int:
    return _normalize(value, DEFAULT_TURN_IDLE_TIMEOUT, MAX_TURN_HARD_CAP)


def normalize_repeat_limit(value: int | float | None) -> int:
    return _normalize(value, DEFAULT_REPEAT_TOOL_CALL_LIMIT, MAX_REPEAT_TOOL_CALL_LIMIT)


@dataclass(frozen=True)
class WatchdogConfig:
    turn_hard_cap_seconds: int = DEFAULT_TURN_HARD_CAP
    turn_idle_timeout_seconds: int = DEFAULT_TURN_IDLE_TIMEOUT
    repeat_tool_call_limit: int = DEFAULT_REPEAT_TOOL_CALL_LIMIT

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> WatchdogConfig:
        s = settings or {}
        return cls(
            turn_hard_cap_seconds=normalize_hard_cap(s.get("turn_hard_cap_seconds")),
            turn_idle_timeout_seconds=normalize_idle_timeout(s.get("turn_idle_timeout_seconds")),
            repeat_tool_call_limit=normalize_repeat_limit(s.get("repeat_tool_call_limit")),
        )


def call_signature(*parts: Any) -> str:
    """A stable signature of a tool call's defining payload."""
    return json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))


@dataclass
class RepeatToolCounter:
    """Counts consecutive identical tool calls within one turn."""

    limit: int
    _last_signature: str | None = None
    _count: int = 0
    _seen_ids: set[str] = field(default_factory=set)

    def reset(self) -> None:
        self._last_signature = None
        self._count = 0
        self._seen_ids.clear()

    @property
    def count(self) -> int:
        return self._count

    def observe(self, call_id: str, signature: str) -> bool:
        """Record one call; True when the limit is reached (the turn must fail)."""
        if call_id in self._seen_ids:
            return self.tripped
        self._seen_ids.add(call_id)
        if signature == self._last_signature:
            self._count += 1
        else:
            self._last_signature = signature
            self._count = 1
        return self.tripped

    @property
    def tripped(self) -> bool:
        return self.limit > 0 and self._count >= self.limit


@dataclass
class TurnClock:
    """Hard cap and idle deadline of one turn. Idle time can be paused (ACP: while a tool
    runs or a permission is pending, the hard cap still applies)."""

    hard_cap: int
    idle_timeout: int
    started_at: float
    last_activity: float = 0.0
    paused: int = 0

    def __post_init__(self) -> None:
        self.last_activity = self.started_at

    def touch(self, now: float) -> None:
        self.last_activity = now

    def pause(self) -> None:
        self.paused += 1

    def resume(self, now: float) -> None:
        self.paused = max(0, self.paused - 1)
        self.last_activity = now

    def expired(self, now: float) -> str | None:
        if self.hard_cap and now - self.started_at >= self.hard_cap:
            return TURN_HARD_CAP
        if self.idle_timeout and not self.paused and now - self.last_activity >= self.idle_timeout:
            return TURN_IDLE_TIMEOUT
        return None

    def next_deadline(self, now: float) -> float | None:
        """Seconds until the next check is due (None: no deadline)."""
        candidates = []
        if self.hard_cap:
            candidates.append(self.started_at + self.hard_cap - now)
        if self.idle_timeout and not self.paused:
            candidates.append(self.last_activity + self.idle_timeout - now)
        if not candidates:
            return None
        return max(0.0, min(candidates))
