"""A plain text card for an event whose kind has no renderer module (yet): what was asked
or what changed, without buttons. Pure."""

from __future__ import annotations

from conversations.cards import card, escape, markdown

TITLES = {"en": {"question": "The agent asks", "permission": "The agent asks for permission",
                 "goal": "Goal"},
          "zh-CN": {"question": "智能体提问", "permission": "智能体请求权限",
                    "goal": "目标"}}
HINT = {"en": "Answer in the panel.", "zh-CN": "请在控制台中回答。"}


def render(kind: str, event_type: str, payload: dict, *, lang: str = "en") -> dict:
    titles = TITLES.get(lang) or TITLES["en"]
    lines: list[str] = []
    if kind == "question":
        for q in payload.get("questions") or []:
            if q.get("header"):
                lines.append(f"**{escape(q['header'])}**")
            lines.append(escape(q.get("text") or ""))
            lines += [f"- {escape(o)}" for o in q.get("options") or []]
        lines.append(HINT.get(lang, HINT["en"]))
    elif kind == "permission":
        lines.append(escape(payload.get("title") or ""))
        lines.append(HINT.get(lang, HINT["en"]))
    else:
        goal = payload.get("goal") or {}
        if event_type == "goal.cleared":
            lines.append("—")
        else:
            lines.append(escape(goal.get("objective") or ""))
            status = goal.get("status")
            if status:
                lines.append(f"`{escape(status)}`")
    return card(titles.get(kind, kind), [markdown("\n".join(x for x in lines if x))],
                "orange" if kind in ("question", "permission") else "blue")
