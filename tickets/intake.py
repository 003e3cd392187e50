"""Intake: verify, store the raw delivery, answer, then process from the stored row.

ARCHITECTURE.md "Intake": a webhook is verified, stored raw with a unique (source,
delivery id) before any processing, and answered at once; processing runs from the stored
row per mailbox (`<source>:<thread>`) in order. The request processes its own mailbox
inline when it can (so the answer names the trigger); anything left unprocessed — a crash
after the answer, an error — is picked up by `process_pending` (a periodic task). A
redelivery finds its delivery id stored and creates nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid

from django.db.models import Count
from django.utils import timezone

from intake.models import Delivery, Source, Thread
from tickets import engine, policy_hooks, rejections
from tickets.sources import plugin
from tickets.sources.base import (
    MAX_BODY,
    ConfigError,
    Context,
    Envelope,
    Ignored,
    Incoming,
    Message,
    Rejected,
    SendResult,
)
from tickets.sources.webchat import WebChat

log = logging.getLogger(__name__)

KEPT_HEADERS = ("content-type", "user-agent", "x-github-event", "x-github-delivery",
                "x-github-hook-id", "x-github-hook-installation-target-type",
                "x-github-hook-installation-target-id", "x-lark-request-timestamp")


def _error(status: int, code: str, message: str) -> tuple[int, dict]:
    return status, {"error": {"code": code, "message": message, "fields": {}}}


def receive(kind: str, slug: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    """One webhook request → (HTTP status, JSON body). Never raises for client input."""
    source = (Source.objects.filter(slug=slug, kind=kind)
              .annotate(policy_version=policy_hooks.current_version_query()).first())
    if source is None or not source.enabled:
        return _error(404, "not_found", f"no enabled {kind} source {slug!r}")
    if len(body) > MAX_BODY:
        return _error(413, "too_large", "the body is larger than 25 MiB")
    plug = plugin(source.kind, source.config, source.secrets)
    incoming = Incoming({k.lower(): v for k, v in headers.items()}, body)
    try:
        env = plug.verify(incoming)
    except Rejected as exc:
        # counted without a database write: forged requests must not cost one each
        rejections.count(source, exc.reason)
        code = {401: "not_authenticated", 413: "too_large"}.get(exc.status, "invalid")
        return _error(exc.status, code, exc.message)
    if env.kind == "ping":
        return 200, {"ping": "ok"}
    if env.kind == "challenge":
        return 200, {"challenge": env.challenge}
    kept = {k: v for k, v in incoming.headers.items() if k in KEPT_HEADERS}
    return accept(source, env, kept, policy_version=source.policy_version or "")


def accept(source: Source, env: Envelope, headers: dict | None = None,
           policy_version: str | None = None) -> tuple[int, dict]:
    """Store a verified event and process its mailbox; answer 202, or 200 duplicate.

    Fast path: one transaction stores the delivery already processed (after any stored,
    unprocessed deliveries of the same mailbox). If processing fails, the raw delivery is
    stored alone and the sweep processes it later: nothing accepted is lost."""
    raw = json.dumps(env.payload, separators=(",", ":"), ensure_ascii=False).encode()
    mailbox = f"{source.slug}:{env.thread}"[:400]
    plug = plugin(source.kind, source.config, source.secrets)
    arrived = {"delivery_id": env.delivery_id, "event": env.event[:100],
               "headers": headers or {}, "body": raw, "result": _safe_translate(plug, env)}
    try:
        outcome = engine.mailbox_processed(
            source=source, mailbox=mailbox, translate=_translate_with(plug),
            decide=functools.partial(policy_hooks.decide_incoming, version=policy_version),
            arrived=arrived,
        )[None]
    except engine.DuplicateDelivery:
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    except Exception:  # store it raw; the sweep processes it later
        log.exception("processing delivery %s of %s failed; stored for the sweep",
                      env.delivery_id, source.slug)
        _pk, created = engine.delivery_received(
            source_id=source.pk, delivery_id=env.delivery_id, event=env.event[:100],
            mailbox=mailbox, headers=headers or {}, body=raw,
        )
        if not created:
            return 200, {"duplicate": True, "delivery": env.delivery_id}
        return 202, {"delivery": env.delivery_id, "trigger": None, "outcome": "queued",
                     "reason": "processing_later"}
    if outcome.outcome == "duplicate":
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    return 202, {"delivery": env.delivery_id, "trigger": outcome.trigger,
                 "outcome": outcome.outcome, "reason": outcome.reason or None}


def _safe_translate(plug, env: Envelope):
    try:
        return plug.translate(env)
    except Exception:
        log.exception("translating %s failed", env.delivery_id)
        return Ignored("unreadable_event", env.thread)


def _translate_with(plug):
    def translate(delivery: Delivery):
        try:
            payload = json.loads(bytes(delivery.body))
        except ValueError:
            return Ignored("unreadable_event", delivery.mailbox.partition(":")[2])
        thread = delivery.mailbox.partition(":")[2]
        env = Envelope("event", delivery.delivery_id, delivery.event, thread, payload)
        return _safe_translate(plug, env)

    return translate


def process_mailbox(source: Source, mailbox: str):
    plug = plugin(source.kind, source.config, source.secrets)
    results = engine.mailbox_processed(
        source=source, mailbox=mailbox, translate=_translate_with(plug),
        decide=policy_hooks.decide_incoming,
    )
    return results


def process_pending(limit: int = 200) -> int:
    """Process every mailbox with stored, unprocessed deliveries (the periodic sweep)."""
    rows = (
        Delivery.objects.filter(processed_at__isnull=True)
        .values_list("source_id", "mailbox")
        .annotate(n=Count("id"))
        .order_by()[:limit]
    )
    done = 0
    sources = {}
    for source_id, mailbox, _n in rows:
        source = sources.get(source_id) or Source.objects.get(pk=source_id)
        sources[source_id] = source
        try:
            done += len(process_mailbox(source, mailbox))
        except Exception:
            log.exception("processing mailbox %s failed", mailbox)
            engine.source_event_rejected(source_id=source_id, reason="processing_failed",
                                         error=True)
    return done


def post_chat_message(source: Source, *, author: str, text: str, thread: str = "",
                      message_id: str = "") -> tuple[int, dict]:
    """A message posted to a web chat source (panel or REST API) enters like a delivery."""
    message_id = message_id or uuid.uuid4().hex
    thread = thread or f"chat-{message_id[:12]}"
    env = WebChat.envelope(message_id, thread, author, text)
    return accept(source, env, {})


def poll(source: Source) -> int:
    """Catch up after downtime through the source's API; the cursor moves only after the
    triggers of everything fetched are stored and processed."""
    plug = plugin(source.kind, source.config, source.secrets)
    if hasattr(plug, "poll_document"):
        return poll_documents(source, plug)
    if not hasattr(plug, "poll"):
        return 0
    cursor = ((source.health.get("cursors") or {}).get("poll") or {}).get("value")
    if not cursor:  # a new source starts from now; history is not replayed
        engine.source_cursor_moved(source_id=source.pk, name="poll",
                                   cursor=timezone.now().isoformat())
        return 0
    envs, new_cursor = plug.poll(cursor, watching=followed_pull_requests(source))
    for env in envs:
        status, _ = accept(source, env, {})
        if status == 202 and Delivery.objects.filter(
            source=source, delivery_id=env.delivery_id, processed_at__isnull=True
        ).exists():
            raise RuntimeError("a polled event is stored but not processed; cursor kept")
    engine.source_cursor_moved(source_id=source.pk, name="poll", cursor=new_cursor)
    return len(envs)


def followed_pull_requests(source: Source) -> list[dict]:
    """The open pull requests that live tickets follow, with the head last reported: the
    catch-up reads their CI results by commit."""
    rows = (
        Thread.objects.filter(source=source, subscription__isnull=False,
                              subscription__ticket__ended_at__isnull=True, meta__pr_state="open")
        .order_by("pk").values_list("key", "meta")
    )
    return [{"thread": key, "head_sha": meta.get("head_sha") or ""} for key, meta in rows]


def poll_documents(source: Source, plug=None) -> int:
    """Catch up on the comments of each watched document (Lark), each document with a
    cursor of its own (`doc:<type>:<token>` in the source's health). Each new comment or
    reply is stored and its trigger recorded in one transaction with its document's
    cursor, so the cursor never passes anything unstored; a webhook delivery of the same
    comment made the same trigger id, so the two paths make one trigger. Reading a
    document for anything else (thread context) never touches a cursor. A document that
    fails keeps its cursor and is noted in health; the others go on."""
    from tickets.sources.lark import DocCursor

    plug = plug or plugin(source.kind, source.config, source.secrets)
    if not plug.config.get("doc_comments"):
        return 0
    cursors = (source.health or {}).get("cursors") or {}
    stored = 0
    for file_type, token in plug.documents():
        name = f"doc:{file_type}:{token}"
        if not (cursors.get(name) or {}).get("value"):
            # A newly watched document starts from now; its history is not replayed.
            start = DocCursor(int(timezone.now().timestamp()))
            engine.source_cursor_moved(source_id=source.pk, name=name, cursor=start.value(),
                                       extra={"seen": []})
            continue
        try:
            for env, after in plug.poll_document(file_type, token,
                                                 DocCursor.load(cursors[name])):
                _store_polled(source, plug, env, (name, after.value(),
                                                  {"seen": list(after.seen)}))
                stored += 1
        except Exception as exc:
            log.warning("polling comments of %s on %s failed: %s", name, source.slug,
                        type(exc).__name__)
            engine.source_event_rejected(source_id=source.pk, reason="doc_poll_failed",
                                         error=True)
    return stored


def _store_polled(source: Source, plug, env: Envelope, cursor: tuple) -> None:
    mailbox = f"{source.slug}:{env.thread}"[:400]
    raw = json.dumps(env.payload, separators=(",", ":"), ensure_ascii=False).encode()
    arrived = {"delivery_id": env.delivery_id, "event": env.event[:100],
               "headers": {"x-amux-poll": "doc_comments"}, "body": raw,
               "result": _safe_translate(plug, env)}
    try:
        engine.mailbox_processed(
            source=source, mailbox=mailbox, translate=_translate_with(plug),
            decide=policy_hooks.decide_incoming, arrived=arrived, cursor=cursor,
        )
    except engine.DuplicateDelivery:  # stored by an earlier poll: only the cursor moves
        engine.source_cursor_moved(source_id=source.pk, name=cursor[0], cursor=cursor[1],
                                   extra=cursor[2])


def send(source: Source, *, message_id: str, thread: str, text: str,
         reply_to: str = "") -> SendResult:
    """Send one message through the source's plugin, once per message id (the outbox
    handler of relays and notices calls this with the effect id)."""
    plug = plugin(source.kind, source.config, source.secrets)

    def store_outgoing(thread_key: str, mid: str, body: str) -> bool:
        return engine.outgoing_stored(source_id=source.pk, thread=thread_key, message_id=mid,
                                      text=body)

    ctx = Context(store_outgoing=store_outgoing)
    # What the source learned about the thread (e.g. a commented document's type).
    meta = Thread.objects.filter(source=source, key=thread).values_list("meta", flat=True)
    return plug.send(Message(str(message_id), thread, text, reply_to,
                             dict(meta.first() or {})), ctx)


def open_pull_request(source: Source, *, repo: str, title: str, body: str, head: str,
                      base: str, closes: int | None = None) -> dict:
    """Open a pull request through the source (GitHub), once per head branch; `closes`
    is the issue it links."""
    plug = plugin(source.kind, source.config, source.secrets)
    if not hasattr(plug, "open_pull_request"):
        raise ConfigError({"source": f"a {source.kind} source cannot open pull requests"})
    return plug.open_pull_request(repo=repo, title=title, body=body, head=head, base=base,
                                  closes=closes)


def health(source: Source) -> dict:
    """Health per declared item: last event, last error, cursor freshness, and counts of
    events seen but not admitted, by content-free reason."""
    stored = dict(source.health or {})
    rejected = dict(stored.get("rejected") or {})
    for reason, n in rejections.pending(source).items():  # refusals not flushed yet
        rejected[reason] = rejected.get(reason, 0) + n
    for reason, n in (
        Delivery.objects.filter(source=source, outcome="ignored")
        .values_list("reason").annotate(n=Count("id")).order_by()
    ):
        rejected[reason] = rejected.get(reason, 0) + n
    last = Delivery.objects.filter(source=source).order_by("-pk").values(
        "received_at", "event", "outcome").first()
    missing = plugin(source.kind).check_secrets(source.config, source.secrets)
    return {
        "last_event": {"at": last["received_at"].isoformat(), "event": last["event"],
                       "outcome": last["outcome"] or "queued"} if last else None,
        "last_error": stored.get("last_error"),
        "rejected": rejected,
        "cursors": stored.get("cursors") or {},
        "unprocessed": Delivery.objects.filter(source=source, processed_at__isnull=True).count(),
        "missing_secrets": sorted(missing),
    }


def poll_all() -> int:
    """Poll every enabled source that catches up by polling; one failing source never
    stops the others (its error is kept in its health)."""
    total = 0
    for source in Source.objects.filter(enabled=True):
        if not plugin(source.kind, source.config, source.secrets).catches_up():
            continue
        try:
            total += poll(source)
        except Exception as exc:
            log.warning("polling %s failed: %s", source.slug, type(exc).__name__)
            engine.source_event_rejected(source_id=source.pk, reason="poll_failed", error=True)
    return total
