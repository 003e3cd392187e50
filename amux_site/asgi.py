"""ASGI entry point: HTTP through Django, websockets through Channels, the executor's MCP
server at /mcp (and /mcp/) with its ASGI lifespan."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from amux_site.routing import websocket_urlpatterns  # noqa: E402
from tickets.tools.mcp_server import McpApp, is_mcp_path  # noqa: E402

channels_app = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
mcp_app = McpApp()


async def application(scope, receive, send):
    """/mcp goes to the MCP server; the ASGI lifespan runs its session manager; everything
    else goes to Channels (Django for http, consumers for websockets)."""
    kind = scope["type"]
    if kind == "lifespan" or (kind == "http" and is_mcp_path(scope["path"])):
        await mcp_app(scope, receive, send)
    else:
        await channels_app(scope, receive, send)
