"""WS /ws/sessions/<id>/timeline?after=<seq>: the canonical timeline, live and resumable.

The consumer subscribes to the session's published events (through this process's feed,
``sessions.fanout``) before it reads the database, sends a snapshot (the session's state and
the events after ``after``), then forwards published events from its own writer task. It
tracks the last sequence it sent: anything at or below it is dropped (no duplicate), and a
jump ahead is filled from the database first (no gap). ``format=html`` sends htmx
out-of-band fragments for the panel instead of JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from sessions import fanout, timeline
from sessions.models import Session

log = logging.getLogger(__name__)

# Published batches a client may have waiting. Beyond that it is behind: further batches are
# dropped, and once it has sent what it holds it catches up from the database.
INBOX_LIMIT = 1000


def _session_state(session_id: int) -> dict[str, Any] | None:
    s = (Session.objects.filter(pk=session_id).select_related("provider")
         .defer("provider__secrets").first())  # the timeline never needs the key
    if s is None:
        return None
    return {"id": s.pk, "name": s.name, "runtime": s.runtime, "model": s.model,
            "provider": s.provider.slug if s.provider else None, "lifecycle": s.lifecycle,
            "sleep_reason": s.sleep_reason, "usage": s.usage,
            "pending": list(timeline.pending_requests(session_id)),
            "last_seq": timeline.last_seq(session_id)}


def _snapshot(session_id: int, after: int) -> tuple[dict[str, Any] | None, list]:
    """The session's state and its events after `after`, in one trip to the database thread
    (with connections not kept, each trip opens one: a reload of many panels pays it per
    client)."""
    state = _session_state(session_id)
    return state, ([] if state is None else timeline.events_after(session_id, after))


# Offered by programs that authenticate with the `amux.token.<token>` subprotocol (see
# amux_site.ws_security); the answer names only this one, never the token.
SUBPROTOCOL = "amux"


class TimelineConsumer(AsyncWebsocketConsumer):
    # No channel per consumer: this process's feed for the session is the subscription.
    channel_layer_alias = None
    hub: fanout.Hub | None = None
    writer: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.session_id = int(self.scope["url_route"]["kwargs"]["pk"])
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last = max(0, int(query.get("after", ["0"])[0] or 0))
        except ValueError:
            self.last = 0
        self.html = query.get("format", ["json"])[0] == "html"
        # The user comes from the session cookie or an API token in a header or subprotocol
        # (amux_site.ws_security); a token in the URL is never read.
        user = self.scope.get("user")
        if not (user and user.is_authenticated and user.is_active):
            await self.close(code=4401)
            return
        self.inbox: asyncio.Queue[list[fanout.Frame]] = asyncio.Queue(INBOX_LIMIT)
        self.behind = False
        self.hub = fanout.hub()
        await self.hub.join(self.session_id, self)  # before reading: nothing falls between
        state, events = await database_sync_to_async(_snapshot)(self.session_id, self.last)
        if state is None:
            await self._leave()
            await self.close(code=4404)
            return
        offered = self.scope.get("subprotocols") or []
        await self.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        if self.html:
            await self.send(text_data=render_to_string("sessions/_snapshot.html",
                                                       {"s": state}))
        else:
            await self.send(text_data=json.dumps({"type": "snapshot", "session": state}))
        await self._send(fanout.frames(self.session_id, events))
        self.writer = asyncio.ensure_future(self._write())

    async def disconnect(self, code: int) -> None:
        if self.writer is not None:
            self.writer.cancel()  # it stops at its next await; nothing of it to wait for
        await self._leave()

    async def _leave(self) -> None:
        if self.hub is not None:
            hub, self.hub = self.hub, None
            await hub.leave(self.session_id, self)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        return  # commands go through the REST API and the panel forms

    def offer(self, batch: list[fanout.Frame]) -> None:
        """A published batch, from this process's feed (synchronous: never blocks the feed)."""
        try:
            self.inbox.put_nowait(batch)
        except asyncio.QueueFull:
            self.behind = True

    async def _write(self) -> None:
        try:
            while True:
                await self._forward(await self.inbox.get())
                if self.behind and self.inbox.empty():
                    self.behind = False
                    await self._fill(None)
        except asyncio.CancelledError:
            raise
        except OSError:  # the client went away (uvicorn's ClientDisconnected)
            return
        except Exception:
            log.warning("timeline writer of session %s failed", self.session_id,
                        exc_info=True)
            with contextlib.suppress(Exception):  # the client reconnects and replays
                await self.close(code=1013)

    async def _forward(self, batch: list[fanout.Frame]) -> None:
        batch = [f for f in batch if f.seq > self.last]
        if not batch:
            return
        if batch[0].seq != self.last + 1:
            await self._fill(batch[0].seq - self.last - 1)
        await self._send(batch)

    async def _fill(self, limit: int | None) -> None:
        """Send what the database holds after the last sent event (up to ``limit``)."""
        missing = await database_sync_to_async(timeline.events_after)(
            self.session_id, self.last, limit)
        await self._send(fanout.frames(self.session_id, missing))

    async def _send(self, batch: list[fanout.Frame]) -> None:
        for frame in batch:
            if frame.seq <= self.last:
                continue
            text = frame.html() if self.html else frame.json()
            await self.base_send({"type": "websocket.send", "text": text})
            self.last = frame.seq
