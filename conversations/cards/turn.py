"""The one card that shows one turn in its Lark place: created when the turn starts,
updated while it runs (the agent's latest text, its tool activity in one line, a working
marker), final at the terminal event. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from conversations.cards import card, escape, markdown

TEXT_LIMIT = 6000  # characters of agent text on one card (Lark cards are bounded)
QUOTE_LIMIT = 200

WORDS = {
    "en": {"running": "Working…", "queued": "Working…", "completed": "Answer",
           "failed": "Failed", "cancelled": "Cancelled", "tool": "Running", "tools_done":
           "{n} tool call(s) done", "via_web": "From the web", "no_text": "(no answer text)",
           "failed_because": "The turn failed: {why}", "cancelled_because":
           "The turn was cancelled ({why})."},
    "zh-CN": {"running": "处理中…", "queued": "处理中…", "completed": "回答",
              "failed": "失败", "cancelled": "已取消", "tool": "正在执行",
              "tools_done": "已完成 {n} 次工具调用", "via_web": "来自网页",
              "no_text": "（没有回答文本）", "failed_because": "本轮失败：{why}",
              "cancelled_because": "本轮已取消（{why}）。"},
}
TEMPLATE = {"running": "blue", "queued": "blue", "completed": "green", "failed": "red",
            "cancelled": "grey"}


@dataclass(frozen=True)
class TurnView:
    state: str  # queued | running | completed | failed | cancelled
    text: str = ""  # the agent's latest text
    tool: str = ""  # the tool running now ("" when none)
    tools_done: int = 0
    quote: str = ""  # the input, when it did not come from this place (web, api …)
    quote_by: str = ""
    error: str = ""  # why it failed or was cancelled

    @property
    def final(self) -> bool:
        return self.state in ("completed", "failed", "cancelled")


def view(state: str, events: list[tuple[str, dict]], *, quote: str = "",
         quote_by: str = "") -> TurnView:
    """What the card shows, from the turn's state and its timeline events in order."""
    text, tool, done, error, running = "", "", 0, "", {}
    for type_, payload in events:
        if type_ == "message.completed" and (payload.get("text") or "").strip():
            text = payload["text"]
        elif type_ == "tool.started":
            running[payload.get("call_id") or ""] = (payload.get("title")
                                                     or payload.get("kind") or "tool")
        elif type_ == "tool.completed":
            running.pop(payload.get("call_id") or "", None)
            done += 1
        elif type_ == "turn.failed":
            error = payload.get("message") or payload.get("code") or ""
        elif type_ == "turn.cancelled":
            error = payload.get("reason") or ""
    if running:
        tool = list(running.values())[-1]
    return TurnView(state=state, text=text, tool=tool, tools_done=done, quote=quote,
                    quote_by=quote_by, error=error)


def render(v: TurnView, lang: str = "en") -> dict:
    words = WORDS.get(lang) or WORDS["en"]
    elements = []
    if v.quote:
        quoted = v.quote if len(v.quote) <= QUOTE_LIMIT else v.quote[:QUOTE_LIMIT] + "…"
        by = f" · {escape(v.quote_by)}" if v.quote_by else ""
        elements.append(markdown(f"*{words['via_web']}{by}:* {escape(quoted)}"))
    text = v.text if len(v.text) <= TEXT_LIMIT else "…" + v.text[-TEXT_LIMIT:]
    if text:
        elements.append(markdown(text))
    if not v.final:
        line = f"{words['tool']}: {escape(v.tool[:120])}" if v.tool else ""
        if v.tools_done:
            done = words["tools_done"].format(n=v.tools_done)
            line = f"{line} · {done}" if line else done
        if line:
            elements.append(markdown(line))
    elif v.state == "failed":
        elements.append(markdown(words["failed_because"].format(why=escape(v.error or "?"))))
    elif v.state == "cancelled":
        elements.append(markdown(words["cancelled_because"].format(
            why=escape(v.error or "?"))))
    elif not text:
        elements.append(markdown(words["no_text"]))
    return card(words.get(v.state, words["running"]), elements,
                TEMPLATE.get(v.state, "blue"))
