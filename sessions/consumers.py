"""WS /ws/sessions/<id>/timeline?after=<seq>: the canonical timeline, live and resumable.

The consumer joins the session's group before it reads the database, sends a snapshot (the
session's state and the events after ``after``), then forwards published events. It tracks
the last sequence it sent: anything at or below it is dropped (no duplicate), and a jump
ahead is filled from the database first (no gap). ``format=html`` sends htmx out-of-band
fragments for the panel instead of JSON.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from sessions import timeline
from sessions.apps import TIMELINE_LAYER
from sessions.models import Session


def _session_state(session_id: int) -> dict[str, Any] | None:
    s = Session.objects.filter(pk=session_id).select_related("provider").first()
    if s is None:
        return None
    return {"id": s.pk, "name": s.name, "runtime": s.runtime, "model": s.model,
            "provider": s.provider.slug if s.provider else None, "lifecycle": s.lifecycle,
            "sleep_reason": s.sleep_reason, "usage": s.usage,
            "pending": list(timeline.pending_requests(session_id)),
            "last_seq": timeline.last_seq(session_id)}


def _token_user(key: str) -> Any:
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user").filter(key=key).first()
    return token.user if token and token.user.is_active else None


def render_event(event: dict[str, Any], session_id: int) -> str:
    return render_to_string("sessions/_event.html", {"e": event, "sid": session_id})


class TimelineConsumer(AsyncWebsocketConsumer):
    channel_layer_alias = TIMELINE_LAYER
    async def connect(self) -> None:
        self.session_id = int(self.scope["url_route"]["kwargs"]["pk"])
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last = max(0, int(query.get("after", ["0"])[0] or 0))
        except ValueError:
            self.last = 0
        self.html = query.get("format", ["json"])[0] == "html"
        user = self.scope.get("user")
        if not (user and user.is_authenticated) and query.get("token"):
            user = await database_sync_to_async(_token_user)(query["token"][0])
        if not (user and user.is_authenticated):
            await self.close(code=4401)
            return
        self.group = timeline.group_name(self.session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        state = await database_sync_to_async(_session_state)(self.session_id)
        if state is None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.close(code=4404)
            return
        await self.accept()
        events = await database_sync_to_async(timeline.events_after)(self.session_id,
                                                                     self.last)
        if self.html:
            await self.send(text_data=render_to_string("sessions/_snapshot.html",
                                                       {"s": state}))
        else:
            await self.send(text_data=json.dumps({"type": "snapshot", "session": state}))
        await self._send(events)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        return  # commands go through the REST API and the panel forms

    async def timeline_events(self, message: dict[str, Any]) -> None:
        events = message["events"]
        for event, text in zip(events, message.get("json") or [], strict=False):
            event["_json"] = text
        events = [e for e in events if e["seq"] > self.last]
        if not events:
            return
        if events[0]["seq"] != self.last + 1:
            missing = await database_sync_to_async(timeline.events_after)(
                self.session_id, self.last, events[0]["seq"] - self.last - 1)
            events = [*missing, *events]
        await self._send(events)

    async def _send(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            if event["seq"] <= self.last:
                continue
            if self.html:
                await self.send(text_data=render_event(event, self.session_id))
            else:  # serialised once by the publisher, not once per client
                await self.send(text_data=event.get("_json") or json.dumps(event))
            self.last = event["seq"]
