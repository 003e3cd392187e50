"""MCP door to the executor's tools: the worker's server at /mcp, official `mcp` SDK (2.x).

The bearer token is the assignment token. amux_site/mcp.py routes a request to this server
only when its token is an assignment's (403 for an ended one) and every tool call resolves
the token again from its own HTTP request, so a token always acts for exactly its own
assignment, even if a client reused another client's MCP session. Tool logic and
validation: tickets.tools.service (shared with REST).
"""

from __future__ import annotations

from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from amux_common.mcp_http import bearer, close_arguments
from tickets.core.messages import REPORT_STATUSES
from tickets.tools import service
from tickets.tools.service import ToolRefused

INSTRUCTIONS = (
    "amux tools for the worker session of one ticket. Call `context` to read your task. "
    "Report progress and the outcome with `report`; ask a person only with `ask` (a "
    "structured question); hand back work outside your mandate with `hand_back`; post on "
    "the ticket's thread with `reply`."
)


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
            bearer(ctx.headers), fn, **kwargs
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

    return close_arguments(server)


def check_token(token: str | None) -> None:
    """Refuses (``ToolRefused``: 401 unknown, 403 ended) a token that is not a live
    assignment's."""
    close_old_connections()
    try:
        service.resolve_token(token)
    finally:
        close_old_connections()
