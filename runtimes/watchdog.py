"""Turn watchdogs as pure logic (no I/O, the clock is passed in).

Seed 000: turn hard cap default 21600 s, 0 disables, negative means default, at most 7 days;
turn idle timeout is a separate limit; the repeated identical tool call limit defaults to 50,
0 disables, negative means default, at most 1000, and ends the turn failed with
``code=repeat_tool_loop``. Identical calls are counted once per distinct started (Codex) or
completed (ACP) native call; repeated frames of the same call do not add; a different call or
a new turn resets the count; a changed result does not reset it.

Tool idle: where the runtime reports tool progress (Codex), a turn with a tool running is
governed by ``tool_idle_timeout_seconds`` instead of the turn idle timeout (silence while a
tool runs is the tool's, not the model's); where it does not (ACP), tool and permission waits
pause the idle timer and only the hard cap applies.

Limits come in layers, session > provider > global > default (``resolve``): a layer that does
not name a limit leaves it to the next one; 0 disables the limit; a negative value means the
built-in default (and stops the lookup); a value above the limit's maximum is refused
(``check_limits``) rather than clamped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TURN_HARD_CAP = 21600
MAX_TURN_HARD_CAP = 7 * 24 * 3600
DEFAULT_TURN_IDLE_TIMEOUT = 1800
DEFAULT_TOOL_IDLE_TIMEOUT = 1800
DEFAULT_REPEAT_TOOL_CALL_LIMIT = 50
MAX_REPEAT_TOOL_CALL_LIMIT = 1000

REPEAT_TOOL_LOOP = "repeat_tool_loop"
TURN_HARD_CAP = "turn_hard_cap"
TURN_IDLE_TIMEOUT = "turn_idle_timeout"
TOOL_IDLE_TIMEOUT = "tool_idle_timeout"

# Every negative value means the default; one below this (a 32-bit integer's least) is
# refused, so the range is bounded without refusing the negatives people already write.
MIN_LIMIT = -(2**31)

# limit name -> (default, maximum)
LIMITS: dict[str, tuple[int, int]] = {
    "turn_hard_cap_seconds": (DEFAULT_TURN_HARD_CAP, MAX_TURN_HARD_CAP),
    "turn_idle_timeout_seconds": (DEFAULT_TURN_IDLE_TIMEOUT, MAX_TURN_HARD_CAP),
    "tool_idle_timeout_seconds": (DEFAULT_TOOL_IDLE_TIMEOUT, MAX_TURN_HARD_CAP),
    "repeat_tool_call_limit": (DEFAULT_REPEAT_TOOL_CALL_LIMIT, MAX_REPEAT_TOOL_CALL_LIMIT),
}


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


def check_limits(values: Any) -> tuple[dict[str, int | None], dict[str, str]]:
    """One layer of limits as given by a person: (the limits it names, problems by field).
    ``None`` (or a missing key) leaves a limit to the next layer."""
    if values is None:
        return {}, {}
    if not isinstance(values, dict):
        return {}, {"watchdog": "must be an object of limits"}
    clean: dict[str, int | None] = {}
    problems: dict[str, str] = {}
    for name, value in values.items():
        if name not in LIMITS:
            problems[name] = "unknown field"
            continue
        if value is None:
            clean[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems[name] = "must be a whole number (0 disables, negative means the default)"
            continue
        maximum = LIMITS[name][1]
        if value < MIN_LIMIT:
            problems[name] = f"must be at least {MIN_LIMIT} (a negative means the default)"
            continue
        if value > maximum:
            problems[name] = f"must be at most {maximum}"
            continue
        clean[name] = value
    return clean, problems


def resolve(layers: list[tuple[str, dict[str, Any] | None]]
            ) -> tuple[dict[str, int], dict[str, str]]:
    """The effective limits from named layers given most specific first (session, provider,
    global): (values, the name of the layer each came from, or ``default``)."""
    values: dict[str, int] = {}
    sources: dict[str, str] = {}
    for name, (default, maximum) in LIMITS.items():
        values[name], sources[name] = default, "default"
        for layer_name, layer in layers:
            value = (layer or {}).get(name)
            if value is None:
                continue
            value = int(value)
            if value >= 0:
                values[name], sources[name] = min(value, maximum), layer_name
            break
    return values, sources


@dataclass(frozen=True)
class WatchdogConfig:
    turn_hard_cap_seconds: int = DEFAULT_TURN_HARD_CAP
    turn_idle_timeout_seconds: int = DEFAULT_TURN_IDLE_TIMEOUT
    repeat_tool_call_limit: int = DEFAULT_REPEAT_TOOL_CALL_LIMIT
    tool_idle_timeout_seconds: int = DEFAULT_TOOL_IDLE_TIMEOUT

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> WatchdogConfig:
        s = settings or {}
        return cls(
            turn_hard_cap_seconds=normalize_hard_cap(s.get("turn_hard_cap_seconds")),
            turn_idle_timeout_seconds=normalize_idle_timeout(s.get("turn_idle_timeout_seconds")),
            repeat_tool_call_limit=normalize_repeat_limit(s.get("repeat_tool_call_limit")),
            tool_idle_timeout_seconds=_normalize(s.get("tool_idle_timeout_seconds"),
                                                 DEFAULT_TOOL_IDLE_TIMEOUT, MAX_TURN_HARD_CAP),
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
    """Hard cap and idle deadlines of one turn. Idle time can be paused (ACP: while a tool
    runs or a permission is pending; the hard cap still applies). With ``tool_idle`` set up
    (``track_tools``: the runtime reports tool progress), time since the last event while a
    tool runs counts against the tool idle limit instead of the turn idle limit."""

    hard_cap: int
    idle_timeout: int
    started_at: float
    last_activity: float = 0.0
    paused: int = 0
    tool_idle: int = 0
    track_tools: bool = False
    open_tools: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.last_activity = self.started_at

    def touch(self, now: float) -> None:
        self.last_activity = now

    def pause(self) -> None:
        self.paused += 1

    def resume(self, now: float) -> None:
        self.paused = max(0, self.paused - 1)
        self.last_activity = now

    def tool_started(self, call_id: str) -> None:
        if self.track_tools:
            self.open_tools.add(call_id)

    def tool_ended(self, call_id: str) -> None:
        self.open_tools.discard(call_id)

    def _idle_limit(self) -> tuple[int, str]:
        if self.open_tools:
            return self.tool_idle, TOOL_IDLE_TIMEOUT
        return self.idle_timeout, TURN_IDLE_TIMEOUT

    def expired(self, now: float) -> str | None:
        if self.hard_cap and now - self.started_at >= self.hard_cap:
            return TURN_HARD_CAP
        limit, code = self._idle_limit()
        if limit and not self.paused and now - self.last_activity >= limit:
            return code
        return None

    def next_deadline(self, now: float) -> float | None:
        """Seconds until the next check is due (None: no deadline)."""
        candidates = []
        if self.hard_cap:
            candidates.append(self.started_at + self.hard_cap - now)
        limit, _ = self._idle_limit()
        if limit and not self.paused:
            candidates.append(self.last_activity + limit - now)
        if not candidates:
            return None
        return max(0.0, min(candidates))
