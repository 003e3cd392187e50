"""amux's MCP server at /mcp (streamable HTTP, bearer token), one door for three kinds of
caller. An assignment token (a worker session's) reaches the worker's tools
(tickets/tools/mcp_server.py); a session's own credential (every other session's: the one
its runtime was launched with) reaches the caller tools acting as the session's owner and
the memory tools (execution/session_tools.py); an amux API token (``manage.py amux token``)
reaches the caller tools (execution/mcp_tools.py); anything else is refused (401, or 403 for
an ended assignment) before the MCP machinery reads the request. Each kind sees only its
own tools: they are three servers. The ASGI lifespan runs their session managers."""

from __future__ import annotations

import contextlib
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from amux_common import bounded_json, mcp_http, plain_asgi
from amux_common.mcp_http import PATH
from amux_site import errors
from execution import mcp_tools, session_tools
from tickets.tools import main_server as main_tools
from tickets.tools import mcp_server as worker_tools
from tickets.tools.service import ToolRefused

WORKER, SESSION, CALLER, MAIN = "worker", "session", "caller", "main"


def route(token: str | None) -> str:
    """Which server a bearer token may use; ``ToolRefused`` when neither."""
    try:
        worker_tools.check_token(token)
        return WORKER
    except ToolRefused as refused:
        if refused.status != 401:
            raise  # a real assignment's token that has ended: say so
    if main_tools.check_token(token):
        return MAIN  # the team's main session: route, dismiss, stop
    if session_tools.session_of(token) is not None:
        return SESSION
    if mcp_tools.api_user(token) is not None:
        return CALLER
    raise ToolRefused(401, "not_authenticated", "an assignment token, a live session's "
                      "credential or an amux API token is required")


def _route_closing(token: str | None) -> str:
    from django.db import close_old_connections

    close_old_connections()
    try:
        return route(token)
    finally:
        close_old_connections()


class McpApp:
    """The ASGI app for /mcp and the ASGI lifespan that runs the servers' task groups."""

    def __init__(self):
        self.apps: dict[str, Any] = {}
        self.running = False

    def _built(self) -> list:
        """The servers and their HTTP apps, new for each lifespan: the SDK runs a server's
        session manager once per instance, so an app started again in the same process (a
        reload, a second server in a test run) needs new ones. Returns the servers."""
        servers = {WORKER: worker_tools.build_server(),
                   SESSION: mcp_tools.build_server(session=True),
                   CALLER: mcp_tools.build_server(), MAIN: main_tools.build_server()}
        self.apps = {kind: mcp_http.http_app(server) for kind, server in servers.items()}
        return list(servers.values())

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if not self.running:
            await mcp_http.refuse(
                send, 503, "unavailable",
                "the MCP server starts with the ASGI lifespan; run amux under uvicorn "
                "(lifespan on) or use the REST API under /api/v1/")
            return
        if scope["type"] != "http":
            return
        if scope["path"] != PATH:
            scope = dict(scope, path=PATH, raw_path=PATH.encode())  # /mcp/ → /mcp, no redirect
        token = mcp_http.bearer(mcp_http.scope_headers(scope))
        try:
            kind = await sync_to_async(_route_closing, thread_sensitive=True)(token)
        except ToolRefused as refused:
            await mcp_http.refuse(send, refused.status, refused.code, refused.message,
                                  refused.fields)
            return
        try:
            body = await plain_asgi.read_body(receive, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        except plain_asgi.Disconnected:
            return
        refusal = _refusal(body)
        if refusal is not None:
            await mcp_http.refuse(send, *refusal)
            return
        await self.apps[kind](scope, plain_asgi.replaying(body, receive), send)

    async def _lifespan(self, receive, send):
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        try:
            async with contextlib.AsyncExitStack() as stack:
                for server in self._built():
                    await stack.enter_async_context(server.session_manager.run())
                self.running = True
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
                self.running = False
        except Exception as exc:  # startup failed: uvicorn reports it and exits
            if not self.running:
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            raise
        await send({"type": "lifespan.shutdown.complete"})


def _refusal(body: bytes | None) -> tuple[int, str, str] | None:
    """The API's answer to a body over the upload limit or nested deeper than amux's bound
    (the SDK reads any body whole, and parses to its own, deeper bound); else None. A body
    that is not JSON is the SDK's to answer, in JSON-RPC's shape."""
    if body is None:
        return 413, "too_large", errors.too_large_message()
    try:
        bounded_json.loads(body)
    except bounded_json.TooDeep as exc:
        return 400, "parse_error", str(exc)
    except ValueError:
        pass
    return None


def is_mcp_path(path: str) -> bool:
    return path in (PATH, PATH + "/")
