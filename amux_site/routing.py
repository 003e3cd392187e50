"""Websocket routes, one list per app, and a last route for any other path: closed with
4404 and one quiet log line (without it, Channels' router raises for each anonymous
handshake to an unknown path, a 500 with a traceback)."""

import logging

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path

from sessions.routing import websocket_urlpatterns as session_routes

log = logging.getLogger(__name__)
NOT_FOUND = 4404


class UnknownPath(AsyncWebsocketConsumer):
    async def connect(self):
        log.info("websocket to an unknown path refused: %s", self.scope.get("path", "")[:200])
        # Accepted first: a close before the accept is an HTTP 403 on the wire, which
        # says "forbidden" and loses the code; after it the client reads 4404.
        await self.accept()
        await self.close(code=NOT_FOUND)


websocket_urlpatterns = [*session_routes, re_path(r"", UnknownPath.as_asgi())]
