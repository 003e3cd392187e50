"""ASGI entry point: HTTP through Django (bodies bounded first, amux_site/body_limit.py),
websockets through Channels, amux's MCP server at /mcp (and /mcp/; worker and caller tools,
amux_site/mcp.py) with its ASGI lifespan, and the webhooks (/hooks/<kind>/<slug>) answered
below Django's handler (intake/hooks_asgi.py), and the git gateway
(/gateway/git/<owner>/<repo>.git/…, tickets/git_gateway.py) and the model gateway
(/gateway/model/<api>/…, sessions/model_gateway.py), streamed."""

import os
from importlib import import_module

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddleware  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.sessions import CookieMiddleware  # noqa: E402
from django.conf import settings  # noqa: E402

from amux_site import gc_startup  # noqa: E402
from amux_site.body_limit import BodyLimit  # noqa: E402
from amux_site.mcp import McpApp, is_mcp_path  # noqa: E402
from amux_site.routing import websocket_urlpatterns  # noqa: E402
from amux_site.ws_security import OriginValidator, TokenAuthMiddleware  # noqa: E402
from intake import hooks_asgi  # noqa: E402
from sessions import model_gateway  # noqa: E402
from tickets import git_gateway  # noqa: E402


class ReadOnlySessionMiddleware:
    """The login session for websockets, read only. Channels' SessionMiddleware also wraps
    ``send`` to save a changed session on HTTP responses, which costs every websocket frame
    a few lazy-object lookups and never applies here: a websocket does not change the
    session."""

    def __init__(self, inner):
        self.inner = inner
        self.store = import_module(settings.SESSION_ENGINE).SessionStore

    async def __call__(self, scope, receive, send):
        session = self.store(scope["cookies"].get(settings.SESSION_COOKIE_NAME))
        return await self.inner({**scope, "session": session}, receive, send)


channels_app = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": OriginValidator(
            CookieMiddleware(ReadOnlySessionMiddleware(
                AuthMiddleware(TokenAuthMiddleware(URLRouter(websocket_urlpatterns)))))
        ),
    }
)
mcp_app = McpApp()


async def application(scope, receive, send):
    """/mcp goes to the MCP server; the ASGI lifespan runs its session manager; webhooks
    are answered by intake; git by the git gateway; model requests by the model gateway
    (first: the hottest path); everything else goes to Channels
    (Django for http, consumers for websockets)."""
    kind = scope["type"]
    if kind == "http" and model_gateway.is_gateway_path(scope["path"]):
        await model_gateway.answer(scope, receive, send)
    elif kind == "lifespan" or (kind == "http" and is_mcp_path(scope["path"])):
        await mcp_app(scope, receive, send)
    elif kind == "http" and hooks_asgi.hook_of(scope["path"]):
        await hooks_asgi.answer(scope, receive, send)
    elif kind == "http" and git_gateway.is_gateway_path(scope["path"]):
        await git_gateway.answer(scope, receive, send)
    else:
        await channels_app(scope, receive, send)


gc_startup.freeze_loaded()  # last: everything above lives as long as the server
