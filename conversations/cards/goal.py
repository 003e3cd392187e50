"""The goal status card (Lark card JSON 2.0) for a ``goal.updated`` / ``goal.cleared``
event: the objective, the native status, token use, budget and elapsed time as the runtime
reports them, in English or Simplified Chinese, with the buttons the status allows. With
no goal (``goal`` asked on a session that has none) the card is the short help: the seven
commands (``sessions.native_goal_commands.HELP``), each with what it does in the card's language.
Only a session whose runtime declared goals ever reports a goal event, so a session without
goals never shows this help.

Each button's callback value names the conversation, the session, the output generation
and the goal (``goal_key``): the card callback checks the first three, the goal action the
last, so a card of a replaced or cleared goal controls nothing.
"""

from __future__ import annotations

from typing import Any

from sessions.native_goal_commands import HELP

TEXT = {
    "en": {
        "title": "Goal", "cleared_title": "Goal cleared", "objective": "Objective",
        "status": "Status", "tokens": "Tokens used", "budget": "Budget",
        "no_budget": "none", "elapsed": "Elapsed", "refused": "Not done",
        "pause": "Pause", "resume": "Resume", "clear": "Clear",
        "cleared": "The goal was cleared; the conversation history is kept.",
        "statuses": {"active": "running", "paused": "paused", "blocked": "blocked",
                     "usageLimited": "usage limit reached",
                     "budgetLimited": "budget used up", "complete": "complete"},
        "starting": "starting", "units": ("h", "m", "s"),
        "no_goal": "No goal is set.",
        "help": "Goal commands (at the very start of a message):",
    },
    "zh-CN": {
        "title": "目标", "cleared_title": "目标已清除", "objective": "目标",
        "status": "状态", "tokens": "已用 tokens", "budget": "预算",
        "no_budget": "未设置", "elapsed": "已用时间", "refused": "未执行",
        "pause": "暂停", "resume": "继续", "clear": "清除",
        "cleared": "目标已清除，会话历史保留。",
        "statuses": {"active": "进行中", "paused": "已暂停", "blocked": "受阻",
                     "usageLimited": "已达用量上限", "budgetLimited": "预算已用完",
                     "complete": "已完成"},
        "starting": "启动中", "units": ("小时", "分", "秒"),
        "no_goal": "当前没有目标。",
        "help": "目标命令（写在消息开头）：",
    },
}
TEMPLATE = {"active": "blue", "paused": "grey", "blocked": "orange", "usageLimited": "orange",
            "budgetLimited": "orange", "complete": "green"}
BUTTONS = {"active": ("pause", "clear"), "paused": ("resume", "clear"),
           "blocked": ("resume", "clear"), "usageLimited": ("resume", "clear"),
           "budgetLimited": ("resume", "clear"), "complete": ("clear",)}


def _texts(lang: str) -> dict[str, Any]:
    return TEXT["zh-CN" if lang == "zh-CN" else "en"]


def elapsed(seconds: int, lang: str) -> str:
    hours, rest = divmod(max(0, int(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    h, m, s = _texts(lang)["units"]
    sep = "" if lang == "zh-CN" else " "
    if hours:
        return f"{hours}{h}{sep}{minutes:02d}{m}{sep}{secs:02d}{s}"
    if minutes:
        return f"{minutes}{m}{sep}{secs:02d}{s}"
    return f"{secs}{s}"


def _escape(text: str) -> str:
    """Card markdown is not the objective's to shape: its markup characters stay text."""
    for char in ("\\", "*", "_", "~", "`", "[", "]", "<", ">"):
        text = text.replace(char, "\\" + char)
    return text


def help_lines(lang: str) -> list[str]:
    """The goal commands as card markdown lines, each with what it does in ``lang``."""
    t = _texts(lang)
    column = 2 if lang == "zh-CN" else 1
    lines = [t["help"]]
    for entry in HELP:
        command = entry[0].replace("<", "&lt;").replace(">", "&gt;")
        lines.append(f"- **{command}** — {entry[column]}")
    return lines


def _button(action: str, label: str, value: dict[str, Any], kind: str) -> dict[str, Any]:
    return {"tag": "button", "text": {"tag": "plain_text", "content": label},
            "type": "danger" if action == "clear" else (
                "primary" if action == "resume" else "default"),
            "behaviors": [{"type": "callback", "value": {**value, "amux": kind}}]}


def render(payload: dict[str, Any], *, conversation_id: int, session_id: int,
           generation: int, lang: str) -> dict[str, Any]:
    """``payload``: a ``goal.updated`` payload (``goal`` present, None when there is no
    goal) or a ``goal.cleared`` one (no ``goal``)."""
    t = _texts(lang)
    if "goal" not in payload:
        return _cleared(t)
    goal = payload.get("goal") or {}
    status = goal.get("status")
    status_text = t["statuses"].get(status, status or t["starting"])
    budget = goal.get("token_budget")
    lines = [] if not goal else [
        f"**{t['objective']}**: {_escape(goal.get('objective') or '')}",
        f"**{t['status']}**: {status_text}",
        f"**{t['tokens']}**: {int(goal.get('tokens_used') or 0):,}",
        f"**{t['budget']}**: {f'{int(budget):,}' if budget is not None else t['no_budget']}",
        f"**{t['elapsed']}**: {elapsed(goal.get('time_used_seconds') or 0, lang)}",
    ]
    if payload.get("refused"):
        lines.append(f"**{t['refused']}**: {_escape(str(payload['refused']))}")
    key = payload.get("goal_key") or ""
    if not goal and not key:  # no goal at all: what one can type
        lines += [t["no_goal"], *help_lines(lang)]
    elements: list[dict[str, Any]] = [{"tag": "markdown", "content": "\n".join(lines)}]
    if key and goal:
        value = {"conversation": conversation_id, "session": session_id, "gen": generation,
                 "goal_key": key}
        buttons = [_button(action, t[action], value, f"goal.{action}")
                   for action in BUTTONS.get(status, ())]
        if buttons:
            elements.append({"tag": "column_set", "flex_mode": "none",
                             "horizontal_spacing": "8px", "columns": [
                                 {"tag": "column", "width": "auto", "elements": [b]}
                                 for b in buttons]})
    return {"schema": "2.0", "config": {"update_multi": True},
            "header": {"title": {"tag": "plain_text", "content": t["title"]},
                       "template": TEMPLATE.get(status, "blue" if goal or key else "grey")},
            "body": {"elements": elements}}


def _cleared(t: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "2.0", "config": {"update_multi": True},
            "header": {"title": {"tag": "plain_text", "content": t["cleared_title"]},
                       "template": "grey"},
            "body": {"elements": [{"tag": "markdown", "content": t["cleared"]}]}}


def inert(card: dict[str, Any]) -> dict[str, Any]:
    """The same card without its buttons (an old goal's card once the goal is replaced)."""
    elements = [e for e in card.get("body", {}).get("elements", [])
                if e.get("tag") != "column_set"]
    return {**card, "body": {**card.get("body", {}), "elements": elements}}
