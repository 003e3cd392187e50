"""Catching up through a source's API on what its receiver missed (GitHub's catch-up poll,
the comments of the documents a Lark source watches, the history of its chats). Polled
events enter like webhook deliveries — same translation, same trigger ids, so a webhook
and a poll of the same thing make one trigger — and a cursor moves only after what it
stands for is stored."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from intake import acks, consumers, source_actions
from intake.models import Delivery, Source, Trigger
from intake.receive import accept
from intake.sources import ChatPolling, DocumentPolling, Polling, plugin
from intake.sources.lark import DocCursor
from intake.sources.lark_history import CHAT_CATCHUP_SECONDS, TOPIC

log = logging.getLogger(__name__)


def poll(source: Source) -> int:
    """Catch up after downtime through the source's API; the cursor moves only after the
    triggers of everything fetched are stored and processed."""
    plug = plugin(source.kind, source.config, source.secrets)
    if isinstance(plug, DocumentPolling | ChatPolling):
        stored = poll_documents(source, plug) if isinstance(plug, DocumentPolling) else 0
        return stored + (poll_chats(source, plug) if isinstance(plug, ChatPolling) else 0)
    if not isinstance(plug, Polling):
        return 0
    cursor = ((source.health.get("cursors") or {}).get("poll") or {}).get("value")
    if not cursor:  # a new source starts from now; history is not replayed
        source_actions.source_cursor_moved(source_id=source.pk, name="poll",
                                           cursor=timezone.now().isoformat())
        return 0
    watching = consumers.of(source).followed_pull_requests(source)
    envs, new_cursor = plug.poll(cursor, watching=watching)
    for env in envs:
        status, _ = accept(source, env, {})
        if status == 202 and Delivery.objects.filter(
            source=source, delivery_id=env.delivery_id, processed_at__isnull=True
        ).exists():
            raise RuntimeError("a polled event is stored but not processed; cursor kept")
    source_actions.source_cursor_moved(source_id=source.pk, name="poll", cursor=new_cursor)
    return len(envs)


def poll_documents(source: Source, plug: DocumentPolling | None = None) -> int:
    """Catch up on the comments of each watched document (Lark), each document with a
    cursor of its own (`doc:<type>:<token>` in the source's health). A newly watched
    document starts a bounded catch-up back (the comments of the week before, at most the
    latest 50: `Lark.catch_up_start`), never "from now". Each new comment or reply is
    captured and its durable effect recorded (intake/acks.py); the cursor moves only past
    comments acknowledged in order — after their effect and, when a receipt reply is due,
    that reply read back from Lark — never at capture. A webhook delivery of the same
    comment makes the same trigger id, so the two paths make one trigger. Reading a
    document for anything else (thread context, its body) never touches a cursor. A
    document that fails keeps its cursor and is noted in health; the others go on."""
    plug = plug or plugin(source.kind, source.config, source.secrets)
    if not plug.config.get("doc_comments"):
        return 0
    stored = 0
    for file_type, token in plug.documents():
        name = f"doc:{file_type}:{token}"
        try:
            cursors = (Source.objects.values_list("health", flat=True).get(pk=source.pk)
                       or {}).get("cursors") or {}
            if not (cursors.get(name) or {}).get("value"):
                start = plug.catch_up_start(file_type, token, int(timezone.now().timestamp()))
                source_actions.source_cursor_moved(source_id=source.pk, name=name,
                                                   cursor=start.value(),
                                                   extra={"seen": list(start.seen)})
                cursors = {name: {"value": start.value(), "seen": list(start.seen)}}
            for env, _after in plug.poll_document(file_type, token,
                                                  DocCursor.load(cursors[name])):
                stored += acks.capture(source, name, env)
            acks.advance(source, name)
        except Exception as exc:
            log.warning("polling comments of %s on %s failed: %s", name, source.slug,
                        failure(exc), exc_info=exc)
            source_actions.source_event_rejected(source_id=source.pk, reason="doc_poll_failed",
                                                 error=True, message=failure(exc))
    return stored


def chats(source: Source, plug: ChatPolling | None = None) -> list[str]:
    """The chats whose history a source catches up: its configured groups and the chats
    its consumer listens on (a goal agent's Lark Bot connection)."""
    plug = plug or plugin(source.kind, source.config, source.secrets)
    if not isinstance(plug, ChatPolling):
        return []
    return plug.chats(consumers.followed_chats(source))


def topics(source: Source, chat: str) -> tuple[str, ...]:
    """The topics of `chat` amux took a message from within the catch-up window: Lark lists
    the replies inside a topic only per topic, so these are read too."""
    since = timezone.now() - timedelta(seconds=CHAT_CATCHUP_SECONDS)
    found = (Trigger.objects.filter(source=source, created_at__gte=since,
                                    meta__chat_id=chat, meta__thread_id__startswith=TOPIC)
             .values_list("meta__thread_id", flat=True).distinct())
    return tuple(sorted({t for t in found if isinstance(t, str)}))


def poll_chats(source: Source, plug: ChatPolling | None = None) -> int:
    """Catch up on the history of each chat (Lark: im/v1 message list), each with a cursor
    of its own (`chat:<chat id>` in the source's health: the create time of the last
    message acknowledged and the ids acknowledged at that second). A chat seen for the first
    time starts from now: history from before amux followed it is not replayed. After that
    each poll reads the chat (and the topics amux knows in it) from its committed cursor,
    oldest first, bounded (`Lark.poll_chat`), and each message enters like its webhook:
    the same trigger id, so a message both paths bring is one trigger, taken by the gate,
    the policy and the source's consumer (tickets, a conversation, a goal connector) as if
    it had arrived live. The cursor moves only past messages whose delivery is processed
    (intake/acks.py), in order. A chat that fails (Lark refuses it: the bot is not in the
    chat) keeps its cursor and is noted in health; the others go on."""
    plug = plug or plugin(source.kind, source.config, source.secrets)
    stored = 0
    for chat in chats(source, plug):
        name = f"chat:{chat}"
        try:
            kept = ((Source.objects.values_list("health", flat=True).get(pk=source.pk)
                     or {}).get("cursors") or {}).get(name) or {}
            now = int(timezone.now().timestamp())
            if not kept.get("value"):
                source_actions.source_cursor_moved(
                    source_id=source.pk, name=name, cursor=DocCursor(now).value(),
                    extra={"seen": []})
                continue
            cur = DocCursor.load(kept)
            if cur.time < now - CHAT_CATCHUP_SECONDS:
                # down longer than the window: what is older is not replayed, said once
                cur = DocCursor(now - CHAT_CATCHUP_SECONDS)
                source_actions.source_cursor_moved(source_id=source.pk, name=name,
                                                   cursor=cur.value(), extra={"seen": []})
                source_actions.source_event_rejected(source_id=source.pk,
                                                     reason="chat_history_beyond_window")
            for env, _after in plug.poll_chat(chat, cur, now, topics(source, chat)):
                stored += acks.capture(source, name, env, how="chat_history")
            acks.advance(source, name)
        except Exception as exc:
            log.warning("catching up %s on %s failed: %s", name, source.slug, failure(exc),
                        exc_info=exc)
            source_actions.source_event_rejected(source_id=source.pk, reason="chat_poll_failed",
                                                 error=True, message=failure(exc))
    return stored


def failure(exc: BaseException) -> str:
    """What failed, for the source's health and the log: the exception's kind and text."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def poll_all() -> int:
    """Poll every enabled source that catches up by polling; one failing source never
    stops the others (its error is kept in its health)."""
    total = 0
    for source in Source.objects.filter(enabled=True):
        if not (plugin(source.kind, source.config, source.secrets).catches_up()
                or consumers.followed_chats(source)):
            continue
        try:
            total += poll(source)
        except Exception as exc:
            log.warning("polling %s failed: %s", source.slug, failure(exc), exc_info=exc)
            source_actions.source_event_rejected(source_id=source.pk, reason="poll_failed",
                                                 error=True, message=failure(exc))
    return total
