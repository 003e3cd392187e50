"""MCP door to the executor's tools: streamable HTTP at /mcp, official `mcp` SDK (2.x).

The bearer token is the assignment token. An outer ASGI guard answers 401 (unknown token)
or 403 (ended assignment) before the MCP machinery sees the request, and every tool call
resolves the token again from its own HTTP request, so a token always acts for exactly
its own assignment, even if a client reused another client's MCP session. The server is
stateless (a fresh transport per request, JSON responses), so any web process can answer
any request. Tool logic and validation: tickets.tools.service (shared with REST).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field

from tickets.core.messages import REPORT_STATUSES
from tickets.tools import service
from tickets.tools.service import ToolRefused

PATH = "/mcp"

INSTRUCTIONS = (
    "amux tools for the worker session of one ticket. Call `context` to read your task. "
    "Report progress and the outcome with `report`; ask a person only with `ask` (a "
    "structured question); hand back work outside your mandate with `hand_back`; post on "
    "the ticket's thread with `reply`."
)


def _bearer(headers) -> str | None:
    value = (headers or {}).get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _call(token: str | None, fn, **kwargs) -> dict:
    """One tool call in a worker thread: resolve the token, then the shared logic."""
    close_old_connections()
    try:
        assignment = service.resolve_token(token)
        return fn(assignment, **kwargs)
    finally:
        close_old_connections()


async def _run(ctx: Context, fn, **kwargs) -> dict:
    try:
        return await sync_to_async(_call, thread_sensitive=True)(
            _bearer(ctx.headers), fn, **kwargs
        )
    except ToolRefused as refused:
        raise ToolError(f"refused ({refused.status} {refused.code}): {refused.message}") from None


def build_server() -> MCPServer:
    server = MCPServer(
        "amux", instructions=INSTRUCTIONS, version="1", log_level="WARNING",
        subscriptions=False,
    )

    @server.tool(name="report", description=service.DESCRIPTIONS["report"])
    async def report(
        status: Annotated[str, Field(
            description="progress, done, blocked or failed",
            # shown to the model; checked by the shared logic so REST and MCP say the same
            json_schema_extra={"enum": list(REPORT_STATUSES)},
        )],
        ctx: Context,
        text: Annotated[str, Field(description="what happened, briefly")] = "",
    ) -> dict[str, Any]:
        return await _run(ctx, service.report, status=status, text=text)

    @server.tool(name="ask", description=service.DESCRIPTIONS["ask"])
    async def ask(
        question: Annotated[str, Field(description="the question for a person")],
        ctx: Context,
        options: Annotated[list[str] | None, Field(description="choices, if any")] = None,
        multi: Annotated[bool, Field(description="several options may be chosen")] = False,
        message_ref: Annotated[
            str, Field(description="the message this is about, e.g. 'input:12'")
        ] = "",
    ) -> dict[str, Any]:
        return await _run(ctx, service.ask, question=question, options=options, multi=multi,
                          message_ref=message_ref)

    @server.tool(name="hand_back", description=service.DESCRIPTIONS["hand_back"])
    async def hand_back(
        trigger: Annotated[int, Field(description="the message's trigger id (see context)")],
        reason: Annotated[str, Field(description="why it is outside this ticket's mandate")],
        ctx: Context,
    ) -> dict[str, Any]:
        return await _run(ctx, service.hand_back, trigger=trigger, reason=reason)

    @server.tool(name="reply", description=service.DESCRIPTIONS["reply"])
    async def reply(
        text: Annotated[str, Field(description="the message to post on the thread")],
        ctx: Context,
    ) -> dict[str, Any]:
        return await _run(ctx, service.reply, text=text)

    @server.tool(name="pull_request", description=service.DESCRIPTIONS["pull_request"])
    async def pull_request(
        title: Annotated[str, Field(description="the pull request's title")],
        head: Annotated[str, Field(description="the branch you pushed")],
        ctx: Context,
        base: Annotated[str | None, Field(description="target branch")] = None,
        body: Annotated[str | None, Field(description="the description")] = None,
    ) -> dict[str, Any]:
        return await _run(ctx, service.pull_request, title=title, head=head, base=base,
                          body=body)

    @server.tool(name="context", description=service.DESCRIPTIONS["context"])
    async def context(ctx: Context) -> dict[str, Any]:
        return await _run(ctx, lambda assignment: service.context(assignment))

    @server.tool(name="memory_search", description=service.DESCRIPTIONS["memory_search"])
    async def memory_search(
        query: Annotated[str, Field(description="a few words to look for")],
        ctx: Context,
    ) -> dict[str, Any]:
        return await _run(ctx, service.memory, query=query)

    @server.tool(name="memory_read", description=service.DESCRIPTIONS["memory_read"])
    async def memory_read(
        id: Annotated[int, Field(description="the entry's id (from memory_search)")],
        ctx: Context,
    ) -> dict[str, Any]:
        return await _run(ctx, service.memory, entry_id=id)

    return server


class BearerGuard:
    """Refuses a request without a valid assignment token before MCP reads it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            await sync_to_async(_check, thread_sensitive=True)(_bearer(headers))
        except ToolRefused as refused:
            await _refuse(send, refused)
            return
        await self.app(scope, receive, send)


def _check(token: str | None) -> None:
    close_old_connections()
    try:
        service.resolve_token(token)
    finally:
        close_old_connections()


async def _refuse(send, refused: ToolRefused) -> None:
    body = json.dumps(
        {"error": {"code": refused.code, "message": refused.message, "fields": refused.fields}}
    ).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if refused.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="amux assignment"'))
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class McpApp:
    """The ASGI app for /mcp: bearer guard + the SDK's streamable HTTP app, and the ASGI
    lifespan that runs the SDK's session manager (its task group)."""

    def __init__(self):
        self.server = build_server()
        self.starlette = self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            # Every request carries a secret bearer token, which a DNS-rebinding page
            # cannot know; amux's own ALLOWED_HOSTS guard the rest of the site.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.guarded = BearerGuard(self.starlette)
        self.running = False

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self.starlette(scope, receive, self._watch_lifespan(send))
            return
        if not self.running:
            await _refuse(send, ToolRefused(
                503, "unavailable",
                "the MCP server starts with the ASGI lifespan; run amux under uvicorn "
                "(lifespan on) or use the REST tools under /api/v1/tools/",
            ))
            return
        if scope["type"] == "http" and scope["path"] != PATH:
            scope = dict(scope, path=PATH, raw_path=PATH.encode())  # /mcp/ → /mcp, no redirect
        await self.guarded(scope, receive, send)

    def _watch_lifespan(self, send):
        async def watched(message):
            if message["type"] == "lifespan.startup.complete":
                self.running = True
            elif message["type"].startswith("lifespan.shutdown"):
                self.running = False
            await send(message)

        return watched


def is_mcp_path(path: str) -> bool:
    return path in (PATH, PATH + "/")
