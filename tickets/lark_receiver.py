"""Lark's long-connection receiver: lark-oapi's WebSocket client in its own process.

An alternative to the events endpoint (no public URL needed). Events arrive already
authenticated by the connection (plaintext, no signature), are turned into the same
envelopes as webhook events, and enter intake the same way: stored unique on event id,
deduplicated by message id, processed in order per thread.
"""

from __future__ import annotations

import json
import logging

from tickets import intake
from tickets.models import Source
from tickets.sources import plugin

log = logging.getLogger(__name__)

EVENTS = ("im.message.receive_v1", "drive.notice.comment_add_v1")


def handle_raw(source: Source, raw: dict) -> tuple[int, dict]:
    """One event as the long connection delivers it (schema 2.0, decrypted) → intake."""
    header = raw.get("header") if isinstance(raw.get("header"), dict) else {}
    event_id, event_type = header.get("event_id"), header.get("event_type")
    if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
        return 400, {"error": {"code": "invalid", "message": "no event id", "fields": {}}}
    env = plugin("lark", source.config, source.secrets).envelope(event_id, event_type, raw)
    return intake.accept(source, env, {"x-lark-receiver": "long_connection"})


def event_handler(slug: str):
    """An EventDispatcherHandler whose callbacks hand each event to intake."""
    import lark_oapi as lark

    def on_event(data) -> None:
        source = Source.objects.filter(slug=slug, kind="lark", enabled=True).first()
        if source is None:
            log.warning("lark source %s is gone or disabled; event dropped", slug)
            return
        raw = json.loads(lark.JSON.marshal(data))
        status, body = handle_raw(source, raw)
        log.info("lark event %s: %s %s", raw.get("header", {}).get("event_id"), status,
                 body.get("outcome") or body.get("duplicate"))

    builder = lark.EventDispatcherHandler.builder("", "")
    builder.register_p2_im_message_receive_v1(on_event)
    builder.register_p2_customized_event("drive.notice.comment_add_v1", on_event)
    return builder.build()


def run(slug: str) -> None:  # pragma: no cover - needs Lark's servers
    import lark_oapi as lark

    source = Source.objects.get(slug=slug, kind="lark")
    client = lark.ws.Client(
        source.config["app_id"], source.secrets.get("app_secret", ""),
        event_handler=event_handler(slug), domain=source.config.get("domain"),
        log_level=lark.LogLevel.INFO, auto_reconnect=True,
    )
    client.start()  # blocks; the supervisor restarts the process if it dies
