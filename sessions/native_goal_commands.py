"""The goal commands a message may start with (seed 000, 原生目标), as pure rules.

Only the bare word ``goal`` at the very start of a message is a command; ``/goal`` and a
``goal`` later in the text are ordinary text:

    goal <text>            create the goal and start it
    goal                   its status
    goal pause | resume | clear
    goal set <text>        replace the goal explicitly
    goal budget <tokens>   a positive whole number of tokens

``parse`` answers ``None`` for ordinary text and a ``GoalCommand`` otherwise; a command
that cannot be carried out as written (``goal budget`` without a positive integer, ``goal
set`` without text) is a ``GoalCommand`` whose ``error`` says why, so the caller refuses it
instead of sending it to the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERBS = ("create", "status", "pause", "resume", "clear", "set", "budget")
KEYWORD = "goal"
# a budget beyond this is not a budget (the runtime's counters are 64-bit)
MAX_BUDGET = 10**15
_WORD = re.compile(r"\S+")

# the short help a goal-capable session shows (the status card with no goal, the web
# session page): each command as typed, what it does in English and Simplified Chinese
HELP: tuple[tuple[str, str, str], ...] = (
    ("goal <text>", "create the goal and start it", "创建目标并开始"),
    ("goal", "show the goal's status", "查看目标状态"),
    ("goal pause", "pause the goal", "暂停目标"),
    ("goal resume", "let a paused goal go on", "继续已暂停的目标"),
    ("goal clear", "remove the goal (the history stays)", "清除目标（会话历史保留）"),
    ("goal set <text>", "replace the goal", "替换目标"),
    ("goal budget <tokens>", "set a token budget (a positive whole number)",
     "设置 token 预算（正整数）"),
)


@dataclass(frozen=True)
class GoalCommand:
    verb: str
    text: str = ""
    budget: int | None = None
    error: str | None = None


def _split(text: str) -> tuple[str, str]:
    """(first word, the rest stripped) of ``text``."""
    match = _WORD.match(text)
    if match is None:
        return "", ""
    return match.group(0), text[match.end():].strip()


def parse(text: str | None) -> GoalCommand | None:
    if not isinstance(text, str) or not text.startswith(KEYWORD):
        return None
    rest = text[len(KEYWORD):]
    if rest and not rest[0].isspace():
        return None  # "goals", "goal:", "goalkeeper": ordinary text
    rest = rest.strip()
    if not rest:
        return GoalCommand("status")
    word, tail = _split(rest)
    lowered = word.lower()
    if lowered in ("pause", "resume", "clear") and not tail:
        return GoalCommand(lowered)
    if lowered == "set":
        if not tail:
            return GoalCommand("set", error="goal set needs the new goal: goal set <text>")
        return GoalCommand("set", text=tail)
    if lowered == "budget":
        return _budget(tail)
    # anything else is the objective of a new goal, exactly as written
    return GoalCommand("create", text=rest)


def _budget(tail: str) -> GoalCommand:
    usage = "goal budget needs a positive whole number of tokens, e.g. goal budget 200000"
    if not re.fullmatch(r"[0-9]+", tail):
        return GoalCommand("budget", error=usage)
    value = int(tail)
    if value <= 0 or value > MAX_BUDGET:
        return GoalCommand("budget", error=usage)
    return GoalCommand("budget", budget=value)
