"""Which Lark place a message belongs to, and what an admitted message does there. Pure.

Seed 000 (话题模式, bot singleton): in topic mode each topic — identified by its thread id
(the message that starts a topic carries a thread id and no root id; its replies carry
both) — or each direct chat is one conversation; in singleton mode the whole bot is one
conversation. A plain group message (no thread id) starts a topic that its replies will
name by its message id as their root, so a place is looked up by thread id, then root id.
"""

from __future__ import annotations

from dataclasses import dataclass

TOPIC, SINGLETON = "topic", "singleton"
MODES = (TOPIC, SINGLETON)

START, POST, IGNORE = "start", "post", "ignore"

# Content-free reasons (the trigger's disposition tells what became of it).
NEEDS_MENTION = "needs_mention"  # unaddressed, in a place no session is bound to yet
NOT_A_MESSAGE = "not_a_chat_message"  # e.g. a document comment: not a conversation


@dataclass(frozen=True)
class Place:
    chat_id: str
    thread_key: str  # "" for a direct chat (one conversation) and for the singleton


def mode_of(config: dict | None) -> str | None:
    """The source's conversation mode, or None when it feeds tickets (`off`, unset)."""
    mode = (config or {}).get("conversation")
    return mode if mode in MODES else None


def place_keys(mode: str, meta: dict) -> list[Place]:
    """The places a message may belong to, the one a new conversation takes first."""
    if mode == SINGLETON:
        return [Place("", "")]
    chat = meta.get("chat_id") or ""
    if meta.get("chat_type") == "p2p":
        return [Place(chat, "")]
    keys = [k for k in (meta.get("thread_id"), meta.get("root_id")) if k]
    if not keys:  # a plain group message starts a topic its replies name by its id
        keys = [meta.get("message_id") or ""]
    return [Place(chat, k) for k in dict.fromkeys(keys)]


def one_person(mode: str, place: Place) -> bool:
    """A direct chat: only the person in it writes there. A topic in a group and the
    singleton are shared: any member may write, so none of them is who the session is."""
    return mode == TOPIC and bool(place.chat_id) and not place.thread_key


def in_thread(mode: str, meta: dict) -> bool:
    """Whether a reply to this message goes into its topic (Lark `reply_in_thread`)."""
    if meta.get("chat_type") == "p2p":
        return False
    return mode == TOPIC or bool(meta.get("thread_id"))


def action(mode: str, decision: str, bound: bool) -> tuple[str, str | None]:
    """What an admitted message does: start a conversation, post into the bound one, or
    nothing (with a content-free reason). The gate decided who may speak; here only an
    explicit request (an allowed person addressed the bot, or a direct chat) starts one.
    In a bound topic an inferred message (the source receives all its messages) is a
    follow-up too; the bot-wide singleton takes only explicit requests."""
    if decision == "explicit":
        return (POST if bound else START), None
    if decision == "inferred" and bound and mode == TOPIC:
        return POST, None
    if decision == "inferred":
        return IGNORE, NEEDS_MENTION
    return IGNORE, None
