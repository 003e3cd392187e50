"""Receiving: verify, store the raw delivery, answer — then process from the stored row.

ARCHITECTURE.md "Intake": a webhook is verified, stored raw with a unique (source,
delivery id) before any processing, and answered at once (`queue`: 202 "queued"); the
intake drainer, woken right after the commit, processes it from the stored row per mailbox
(`<source>:<thread>`) in order (intake/process.py), and the intake sweep picks up whatever
a lost wake-up, a crash or a failing plugin left. A redelivery finds its delivery id
stored and creates nothing. Events amux fetches or makes itself (the catch-up poll, web
chat messages) are stored and processed in one go (`accept`).
"""

from __future__ import annotations

import functools
import json
import logging
import uuid

from intake import card_hooks, process, rejections
from intake.decide import decide_incoming
from intake.models import Source
from intake.sources import plugin
from intake.sources.base import MAX_BODY, Envelope, Incoming, Rejected
from intake.sources.webchat import WebChat

log = logging.getLogger(__name__)

KEPT_HEADERS = ("content-type", "user-agent", "x-github-event", "x-github-delivery",
                "x-github-hook-id", "x-github-hook-installation-target-type",
                "x-github-hook-installation-target-id", "x-lark-request-timestamp")


def _error(status: int, code: str, message: str) -> tuple[int, dict]:
    return status, {"error": {"code": code, "message": message, "fields": {}}}


def receive(kind: str, slug: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    """One webhook request → (HTTP status, JSON body). Never raises for client input.
    The hot path: one SELECT (the source), the signature, one INSERT (the delivery)."""
    source = Source.objects.filter(slug=slug, kind=kind).first()
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
    if kind == "lark" and env.event == card_hooks.CARD_ACTION:  # answered now, never stored raw
        return card_hooks.answer(source, env.payload)
    kept = {k: v for k, v in incoming.headers.items() if k in KEPT_HEADERS}
    return queue(source, env, kept)


def _raw(env: Envelope) -> bytes:
    return json.dumps(env.payload, separators=(",", ":"), ensure_ascii=False).encode()


def queue(source: Source, env: Envelope, headers: dict) -> tuple[int, dict]:
    """Store a verified event for the drainer and answer at once: 202 queued, or 200
    duplicate when its delivery id was stored before."""
    created = process.delivery_stored(
        source_id=source.pk, delivery_id=env.delivery_id, event=env.event[:100],
        mailbox=f"{source.slug}:{env.thread}"[:400], headers=headers, body=_raw(env),
    )
    if not created:
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    return 202, {"delivery": env.delivery_id, "trigger": None, "outcome": "queued",
                 "reason": None}


def arrived(plug, env: Envelope, headers: dict) -> dict:
    """A verified event as `process.mailbox_processed` takes it, translated by its plugin
    (which may raise: then nothing is processed and the raw delivery waits for a retry)."""
    raw = _raw(env)
    return {"delivery_id": env.delivery_id, "event": env.event[:100], "headers": headers,
            "body": raw, "result": plug.translate(env)}


def accept(source: Source, env: Envelope, headers: dict | None = None,
           policy_version: str | None = None) -> tuple[int, dict]:
    """Store an event and process its mailbox in one go (the catch-up poll, web chat);
    answer 202 with the outcome, or 200 duplicate.

    Fast path: one transaction stores the delivery already processed (after any stored,
    unprocessed deliveries of the same mailbox). If processing fails (the plugin or the
    gate raised), the raw delivery is stored alone with the error and the sweep processes
    it later: nothing accepted is lost, nothing is dropped as unreadable."""
    mailbox = f"{source.slug}:{env.thread}"[:400]
    plug = plugin(source.kind, source.config, source.secrets)
    headers = headers or {}
    try:
        outcome = process.mailbox_processed(
            source=source, mailbox=mailbox,
            translate=functools.partial(process.translate_stored, plug),
            decide=functools.partial(decide_incoming, version=policy_version),
            arrived=arrived(plug, env, headers),
        )[None]
    except process.DuplicateDelivery:
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    except Exception as exc:  # store it raw with the error; the sweep processes it later
        log.exception("processing delivery %s of %s failed; stored for the sweep",
                      env.delivery_id, source.slug)
        raw = _raw(env)
        _pk, created = process.delivery_received(
            source_id=source.pk, delivery_id=env.delivery_id, event=env.event[:100],
            mailbox=mailbox, headers=headers, body=raw, error=process.error_text(exc),
        )
        if not created:
            return 200, {"duplicate": True, "delivery": env.delivery_id}
        return 202, {"delivery": env.delivery_id, "trigger": None, "outcome": "queued",
                     "reason": "processing_later"}
    if outcome.outcome == "duplicate":
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    return 202, {"delivery": env.delivery_id, "trigger": outcome.trigger,
                 "outcome": outcome.outcome, "reason": outcome.reason or None}


def post_chat_message(source: Source, *, author: str, text: str, thread: str = "",
                      message_id: str = "") -> tuple[int, dict]:
    """A message posted to a web chat source (panel or REST API) enters like a delivery."""
    message_id = message_id or uuid.uuid4().hex
    thread = thread or f"chat-{message_id[:12]}"
    env = WebChat.envelope(message_id, thread, author, text)
    return accept(source, env, {})
