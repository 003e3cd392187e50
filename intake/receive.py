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

from django.db.models import TextField
from django.db.models.functions import Cast

from amux_common import metrics
from amux_common.plain_asgi import error as _error
from intake import card_hooks, process, profile, record, rejections
from intake.checked_insert import SourceSeen
from intake.decide import decide_incoming
from intake.models import Source
from intake.sources import plugin
from intake.sources.base import MAX_BODY, Envelope, Incoming, Rejected
from intake.sources.webchat import WebChat

log = logging.getLogger(__name__)

KEPT_HEADERS = ("content-type", "user-agent", "x-github-event", "x-github-delivery",
                "x-github-hook-id", "x-github-hook-installation-target-type",
                "x-github-hook-installation-target-id", "x-lark-request-timestamp")


def refused_unread(method: str, content_length: str | None) -> tuple[int, dict] | None:
    """The answer to a request no webhook can be, decided before its body is read (405 for
    a method other than POST, 413 for a declared length over the cap), else None."""
    if method != "POST":
        return _error(405, "method_not_allowed", "use POST")
    try:
        length = int(content_length or 0)
    except ValueError:
        length = 0
    return too_large() if length > MAX_BODY else None


TOO_LARGE = _error(413, "too_large", "the body is larger than 25 MiB")


def too_large() -> tuple[int, dict]:
    """The answer to a body over the cap, counted (under no source: its slug is unchecked)."""
    metrics.delivery_refused("", "too_large")
    return TOO_LARGE


def receive(kind: str, slug: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    """One webhook request → (HTTP status, JSON body). Never raises for client input.

    The hot path is one database round trip: the source row this process read before
    (kept in memory) is used to verify, and the INSERT of the delivery stores it only if
    the row still holds exactly what was verified against (process.delivery_stored's
    `seen`). Whatever else the kept row would answer (a rejection, a ping or challenge, a
    row that changed) is answered from the row read afresh."""
    if len(body) > MAX_BODY:
        return too_large()
    kept = _seen.get((kind, slug))
    if kept is not None:
        answer = _received(kept, headers, body, stored_only=True)
        if answer is not None:
            return answer
    kept = _read(kind, slug)
    if kept is None:
        metrics.delivery_refused("", "unknown_source")  # a slug a client made up: no label
        return _error(404, "not_found", f"no enabled {kind} source {slug!r}")
    return _received(kept, headers, body, stored_only=False)


# (kind, slug) -> (the source, the row as stored) of the sources this process received for
_seen: dict[tuple[str, str], tuple[Source, SourceSeen]] = {}
SEEN_MAX = 1000


def _read(kind: str, slug: str) -> tuple[Source, SourceSeen] | None:
    source = (Source.objects.filter(slug=slug, kind=kind, enabled=True)
              .annotate(secrets_stored=Cast("secrets", TextField())).first())
    if source is None:
        _seen.pop((kind, slug), None)
        return None
    kept = source, SourceSeen(source.pk, source.kind, source.slug, source.config,
                                      source.secrets_stored)
    if len(_seen) >= SEEN_MAX:
        _seen.clear()
    _seen[(kind, slug)] = kept
    return kept


def _received(kept: tuple[Source, SourceSeen], headers: dict[str, str], body: bytes,
              stored_only: bool) -> tuple[int, dict] | None:
    """Verify against `kept` and store. `stored_only`: None instead of any answer that is
    not a delivery stored against the unchanged row (the caller reads the row afresh)."""
    source, seen = kept
    plug = plugin(source.kind, source.config, source.secrets)
    incoming = Incoming({k.lower(): v for k, v in headers.items()}, body)
    try:
        env = plug.verify(incoming)
    except Rejected as exc:
        if stored_only:
            return None
        # counted without a database write: forged requests must not cost one each
        rejections.count(source, exc.reason)
        code = {401: "not_authenticated", 413: "too_large"}.get(exc.status, "invalid")
        return _error(exc.status, code, exc.message)
    if env.kind != "event" and stored_only:
        return None
    if env.kind == "ping":
        return 200, {"ping": "ok"}
    if env.kind == "challenge":
        return 200, {"challenge": env.challenge}
    if source.kind == "lark" and env.event == card_hooks.CARD_ACTION:
        if stored_only:  # answered now against the source as it is, never stored raw
            return None
        return card_hooks.answer(source, env.payload)
    kept_headers = {k: v for k, v in incoming.headers.items() if k in KEPT_HEADERS}
    try:
        return queue(source, env, kept_headers, seen=seen)
    except process.SourceChanged:
        if stored_only:
            return None
        return _error(404, "not_found", f"no enabled {source.kind} source {source.slug!r}")


def _raw(env: Envelope) -> bytes:
    """What is stored of an event: its JSON as it came, else the payload encoded."""
    if env.raw:
        return env.raw
    return json.dumps(env.payload, separators=(",", ":"), ensure_ascii=False).encode()


def queue(source: Source, env: Envelope, headers: dict,
          seen: SourceSeen | None = None) -> tuple[int, dict]:
    """Store a verified event for the drainer and answer at once: 202 queued, or 200
    duplicate when its delivery id was stored before. With `seen`, only while the source
    row is still that (else process.SourceChanged)."""
    created = process.delivery_stored(
        source_id=source.pk, delivery_id=env.delivery_id, event=env.event[:100],
        mailbox=f"{source.slug}:{env.thread}"[:400], headers=headers, body=_raw(env),
        seen=seen,
    )
    if not created:
        metrics.delivery_refused(source.slug, "duplicate")
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    metrics.delivery_received(source.slug)
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
    plug = profile.translator(profile.ensure_verified(source))
    headers = headers or {}
    try:
        outcome = process.mailbox_processed(
            source=source, mailbox=mailbox,
            translate=functools.partial(record.translate_stored, plug),
            decide=functools.partial(decide_incoming, version=policy_version),
            arrived=arrived(plug, env, headers),
        )[None]
    except process.DuplicateDelivery:
        metrics.delivery_refused(source.slug, "duplicate")
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    except Exception as exc:  # store it raw with the error; the sweep processes it later
        log.exception("processing delivery %s of %s failed; stored for the sweep",
                      env.delivery_id, source.slug)
        raw = _raw(env)
        _pk, created = process.delivery_received(
            source_id=source.pk, delivery_id=env.delivery_id, event=env.event[:100],
            mailbox=mailbox, headers=headers, body=raw, error=record.error_text(exc),
        )
        if not created:
            metrics.delivery_refused(source.slug, "duplicate")
            return 200, {"duplicate": True, "delivery": env.delivery_id}
        metrics.delivery_received(source.slug)
        return 202, {"delivery": env.delivery_id, "trigger": None, "outcome": "queued",
                     "reason": "processing_later"}
    if outcome.outcome == "duplicate":
        metrics.delivery_refused(source.slug, "duplicate")
        return 200, {"duplicate": True, "delivery": env.delivery_id}
    metrics.delivery_received(source.slug)
    return 202, {"delivery": env.delivery_id, "trigger": outcome.trigger,
                 "outcome": outcome.outcome, "reason": outcome.reason or None}


def post_chat_message(source: Source, *, author: str, text: str, thread: str = "",
                      message_id: str = "") -> tuple[int, dict]:
    """A message posted to a web chat source (panel or REST API) enters like a delivery."""
    message_id = message_id or uuid.uuid4().hex
    thread = thread or f"chat-{message_id[:12]}"
    env = WebChat.envelope(message_id, thread, author, text)
    return accept(source, env, {})
