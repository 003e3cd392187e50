"""Websocket routes, one list per app."""

from sessions.routing import websocket_urlpatterns as session_routes

websocket_urlpatterns = [*session_routes]
