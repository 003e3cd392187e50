"""Lark chat catch-up: what a chat's webhooks would have said while amux was down, read back
through lark-oapi's im/v1 message list.

Lark lists a chat's own messages and the first message of each topic, but the replies inside
a topic only per topic (`container_id_type=thread`, which takes no time range). So the
history of a chat is the chat's list merged, by create time, with the list of each topic
amux knows there (`topics`) and of each topic that starts in the chat's list on the way:
one stream in Lark's order, under one cursor. Each message becomes the schema 2.0
`im.message.receive_v1` envelope Lark would have pushed for it, so it takes the webhook's
path: the same translation, the same trigger id (`message:<id>`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Iterator

from intake.sources.lark_api import LarkApiError

# At most this many messages per chat and poll (the rest waits for the next poll, the cursor
# just before them), never older than a week: what was sent before that, while amux was down
# longer, is not replayed.
CHAT_CATCHUP_MESSAGES, CHAT_CATCHUP_SECONDS = 200, 7 * 24 * 3600
CHAT_PAGE = 50  # the largest page Lark's message list serves
MESSAGE_EVENT = "im.message.receive_v1"
TOPIC = "omt_"  # a topic's id; a quote reply may name its root's message id instead

log = logging.getLogger(__name__)


def catch_up(plug, chat: str, cursor, now: int, topics=()) -> list:
    """(envelope, cursor after it) for each message of `chat` and its topics after `cursor`
    (a DocCursor), never older than CHAT_CATCHUP_SECONDS before `now`, oldest first, at
    most CHAT_CATCHUP_MESSAGES. Withdrawn and system messages arrive by no webhook and make
    no envelope; the cursor does not stop on them (they stay behind it until a message
    after them is stored)."""
    since = max(cursor.time, now - CHAT_CATCHUP_SECONDS)
    steps: list = []
    cur = cursor
    for item in history(plug.client(), chat, since, topics):
        message_id = item.message_id or ""
        at = int(item.create_time or 0) // 1000
        if not message_id or at < since or (at == cursor.time and message_id in cursor.seen):
            continue
        if item.deleted or item.msg_type == "system":
            continue
        cur = cur.passing([(message_id, at)])
        delivery = f"poll:message:{message_id}"
        steps.append((plug.envelope(delivery, MESSAGE_EVENT, event_body(plug.config, delivery,
                                                                        chat, item)), cur))
        if len(steps) >= CHAT_CATCHUP_MESSAGES:
            break
    return steps


def history(client, chat: str, since: int, topics=()) -> Iterator:
    """The messages of `chat` from `since` (seconds) and of its topics, each once, by create
    time; lists are read page by page only as far as the caller reads."""
    order = itertools.count()
    heap: list = []
    followed: set[str] = set()

    def follow(listing: Iterator) -> None:
        item = next(listing, None)
        if item is not None:
            heapq.heappush(heap, (int(item.create_time or 0), next(order), item, listing))

    def topic(thread_id: str) -> None:
        if thread_id.startswith(TOPIC) and thread_id not in followed:
            followed.add(thread_id)
            follow(_topic(client, thread_id, since))

    follow(_listed(client, "chat", chat, since))
    for thread_id in topics:
        topic(thread_id or "")
    given: set[str] = set()
    while heap:
        _, _, item, listing = heapq.heappop(heap)
        follow(listing)
        # a topic that starts (or first shows) here: its replies come at or after it
        topic(item.thread_id or "")
        if item.message_id in given:  # a topic's first message is in both lists
            continue
        given.add(item.message_id)
        yield item


def _topic(client, thread_id: str, since: int) -> Iterator:
    """One topic's messages; a topic Lark refuses to list (withdrawn, out of reach) is
    skipped, logged, so it never holds back the chat's other messages."""
    try:
        yield from _listed(client, "thread", thread_id, since)
    except LarkApiError as exc:
        log.warning("lark topic %s not caught up: code %s", thread_id, exc.code)


def _listed(client, kind: str, container: str, since: int) -> Iterator:
    """One container's messages (a chat's from `since`; a topic's all, Lark takes no time
    range there), oldest first, paged. Raises LarkApiError when Lark refuses (230002: the
    bot is not in the chat)."""
    from lark_oapi.api.im.v1 import ListMessageRequest

    page_token = ""
    while True:
        builder = (ListMessageRequest.builder().container_id_type(kind)
                   .container_id(container).sort_type("ByCreateTimeAsc").page_size(CHAT_PAGE))
        if kind == "chat":
            builder = builder.start_time(str(since))
        if page_token:
            builder = builder.page_token(page_token)
        resp = client.im.v1.message.list(builder.build())
        if not resp.success():
            raise LarkApiError(f"message list ({kind})", resp)
        data = resp.data
        yield from (m for m in (data.items if data else None) or []
                    if int(m.create_time or 0) // 1000 >= since)
        page_token = (data.page_token if data else "") or ""
        if not (data and data.has_more and page_token):
            return


def event_body(config: dict, delivery: str, chat: str, item) -> dict:
    """A listed message as the schema 2.0 event Lark would have pushed for it."""
    app_id = config.get("app_id") or ""
    sender = item.sender
    sender_id = (sender.id if sender else "") or ""
    sender_type = (sender.sender_type if sender else "") or ""
    if sender_type == "app" and sender_id == app_id:
        # the list names an app by its app id, the event by the bot's open id
        sender_id = config.get("bot_open_id") or sender_id
    created = str(item.create_time or 0)
    return {"schema": "2.0",
            "header": {"event_id": delivery, "event_type": MESSAGE_EVENT,
                       "create_time": created, "app_id": app_id},
            "event": {
                "sender": {"sender_id": {"open_id": sender_id}, "sender_type": sender_type},
                "message": {
                    "message_id": item.message_id, "root_id": item.root_id or "",
                    "parent_id": item.parent_id or "", "thread_id": item.thread_id or "",
                    "chat_id": item.chat_id or chat, "chat_type": "group",
                    "message_type": item.msg_type or "", "create_time": created,
                    "content": (item.body.content if item.body else "") or "",
                    "mentions": [{"key": m.key or "", "id": {"open_id": m.id or ""},
                                  "name": m.name or ""} for m in item.mentions or []]}}}
