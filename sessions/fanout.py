"""One timeline subscription per (process, session), fanned out in memory to the websockets.

The first websocket of a session in this process opens the session's *feed*: one channel on
the timeline channel layer, joined to the session's group, and one task that receives each
published message once and hands its events to every local subscriber of that session. A
subscriber (``TimelineConsumer``) only queues them (``offer``, synchronous); its own writer
task sends them, so a slow client never holds back the others. When the last subscriber of
a session leaves, the feed leaves the group.

Each event becomes one ``Frame`` per process, whose JSON text (rendered once by the
publisher) and panel HTML fragment (rendered here on first use) every client shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from typing import Any, Protocol

from channels.layers import get_channel_layer
from django.conf import settings
from django.template.loader import render_to_string

from sessions import timeline, timeline_view

log = logging.getLogger(__name__)


def render_event(event: dict[str, Any], session_id: int) -> str:
    return render_to_string("sessions/_event.html", timeline_view.context(event, session_id))


class Frame:
    """One stored event and its encodings, made once per process and shared by its clients."""

    __slots__ = ("_html", "_json", "event", "session_id")

    def __init__(self, session_id: int, event: dict[str, Any], json_text: str | None = None):
        self.session_id = session_id
        self.event = event
        self._json = json_text
        self._html: str | None = None

    @property
    def seq(self) -> int:
        return self.event["seq"]

    def json(self) -> str:
        if self._json is None:
            self._json = json.dumps(self.event)
        return self._json

    def html(self) -> str:
        if self._html is None:
            self._html = render_event(self.event, self.session_id)
        return self._html


def frames(session_id: int, events: list[dict[str, Any]],
           texts: list[str] | None = None) -> list[Frame]:
    texts = texts or []
    return [Frame(session_id, event, texts[i] if i < len(texts) else None)
            for i, event in enumerate(events)]


class Subscriber(Protocol):
    def offer(self, batch: list[Frame]) -> None: ...


class _Feed:
    def __init__(self, session_id: int):
        self.session_id = session_id
        self.subscribers: dict[Subscriber, None] = {}  # ordered set
        self.channel: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.opening: asyncio.Future[None] | None = None


class Hub:
    """The feeds of one event loop (one per process under uvicorn)."""

    def __init__(self, layer: Any):
        self.layer = layer
        self.feeds: dict[int, _Feed] = {}

    async def join(self, session_id: int, subscriber: Subscriber) -> None:
        """Returns once the session's published messages reach ``subscriber.offer``."""
        feed = self.feeds.get(session_id)
        if feed is None:
            feed = self.feeds[session_id] = _Feed(session_id)
            feed.opening = asyncio.ensure_future(self._open(feed))
        feed.subscribers[subscriber] = None
        try:
            await asyncio.shield(feed.opening)
        except BaseException:
            await self.leave(session_id, subscriber)
            raise

    async def leave(self, session_id: int, subscriber: Subscriber) -> None:
        feed = self.feeds.get(session_id)
        if feed is None or subscriber not in feed.subscribers:
            return
        del feed.subscribers[subscriber]
        if feed.subscribers:
            return
        del self.feeds[session_id]
        await self._close(feed)

    async def _open(self, feed: _Feed) -> None:
        feed.channel = await self.layer.new_channel()
        await self.layer.group_add(timeline.group_name(feed.session_id), feed.channel)
        feed.task = asyncio.ensure_future(self._run(feed))

    async def _close(self, feed: _Feed) -> None:
        if feed.opening is not None:
            with contextlib.suppress(Exception):
                await feed.opening
        if feed.task is not None:
            feed.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feed.task
        if feed.channel is not None:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(timeline.group_name(feed.session_id),
                                               feed.channel)

    async def _run(self, feed: _Feed) -> None:
        while True:
            try:
                message = await self.layer.receive(feed.channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # the subscribers catch up from the database on the next event
                log.warning("timeline feed of session %s: receive failed", feed.session_id,
                            exc_info=True)
                await asyncio.sleep(1)
                continue
            if message.get("type") != "timeline.events" or not message.get("events"):
                continue
            batch = frames(feed.session_id, message["events"], message.get("json"))
            for subscriber in list(feed.subscribers):
                subscriber.offer(batch)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub() -> Hub:
    """This event loop's hub."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = Hub(get_channel_layer(settings.TIMELINE_LAYER))
    return found
