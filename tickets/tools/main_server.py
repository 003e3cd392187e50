"""MCP door to the main session's tools at /mcp (amux_site/mcp.py routes a request here
when its bearer token is the main session's): route, dismiss, stop. Each call resolves the
token again from its own HTTP request. Arguments are hostile input: the actions
(tickets/actions/main_routing.py) check every one and refuse with a reason the model reads.
There is no tool to take a message a ticket's executor owns, nor to write a plan."""

from __future__ import annotations

from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from amux_common.mcp_http import bearer, close_arguments
from tickets import main_config
from tickets.actions import main_routing
from tickets.core.errors import CommandRefused
from tickets.core.main_session import NOTE_MAX_WORDS
from tickets.tools.service import ToolRefused

INSTRUCTIONS = (
    "amux tools for the team's main session. route turns an explicit request into a "
    "ticket with a routing note (where to look, never a plan); dismiss takes no action on "
    "one; stop ends a ticket. Follow-ups belong to the ticket's worker."
)

DESCRIPTIONS = {
    "route": (
        "Route an explicit request (trigger id from the notice) to a new ticket and its "
        f"worker. note: the routing note, at most {NOTE_MAX_WORDS} words — where to look "
        "and what to read first, never what to build; a longer note is refused, not cut. "
        "The worker reads the original request itself. A message a ticket's worker owns "
        "cannot be routed."),
    "dismiss": (
        "Take no action on an explicit request awaiting routing. reason: one line for the "
        "operators; nothing is posted anywhere."),
    "stop": (
        "Stop a ticket's worker: the ticket ends, its thread stays subscribed. Use it when "
        "a person with authority over the ticket asks, or its mandate no longer holds. "
        "reason: one line, shown to the operators."),
}


def check_token(token: str | None) -> bool:
    close_old_connections()
    try:
        return main_config.session_for_token(token) is not None
    finally:
        close_old_connections()


def _call(token: str | None, fn, kwargs) -> dict:
    close_old_connections()
    try:
        if main_config.session_for_token(token) is None:
            raise ToolRefused(401, "not_authenticated", "unknown or replaced main-session token")
        return fn(**kwargs)
    except CommandRefused as refused:
        raise ToolRefused(refused.status, refused.code, refused.message) from None
    finally:
        close_old_connections()


async def _run(ctx: Context, fn, **kwargs) -> dict:
    try:
        return await sync_to_async(_call, thread_sensitive=True)(bearer(ctx.headers), fn,
                                                                 kwargs)
    except ToolRefused as refused:
        raise ToolError(f"refused ({refused.status} {refused.code}): {refused.message}") from None


def _route(trigger, note) -> dict:
    routed = main_routing.route(trigger_id=trigger, note=note)
    return {"trigger": routed.trigger, "disposition": routed.disposition,
            "ticket": routed.ticket}


def _dismiss(trigger, reason) -> dict:
    routed = main_routing.dismiss(trigger_id=trigger, reason=reason)
    return {"trigger": routed.trigger, "disposition": routed.disposition}


def _stop(ticket, reason) -> dict:
    stopped = main_routing.stop(ticket_id=ticket, reason=reason)
    return {"ticket": stopped.pk, "ended": True, "end_reason": stopped.end_reason}


def build_server() -> MCPServer:
    server = MCPServer("amux", instructions=INSTRUCTIONS, version="1", log_level="WARNING",
                       subscriptions=False)

    @server.tool(name="route", description=DESCRIPTIONS["route"])
    async def route(
        trigger: Annotated[int, Field(description="the request's trigger id")],
        ctx: Context,
        note: Annotated[str, Field(
            description=f"where to look, at most {NOTE_MAX_WORDS} words")] = "",
    ) -> dict[str, Any]:
        return await _run(ctx, _route, trigger=trigger, note=note)

    @server.tool(name="dismiss", description=DESCRIPTIONS["dismiss"])
    async def dismiss(
        trigger: Annotated[int, Field(description="the request's trigger id")],
        reason: Annotated[str, Field(description="one line for the operators")],
        ctx: Context,
    ) -> dict[str, Any]:
        return await _run(ctx, _dismiss, trigger=trigger, reason=reason)

    @server.tool(name="stop", description=DESCRIPTIONS["stop"])
    async def stop(
        ticket: Annotated[int, Field(description="the ticket's id")],
        reason: Annotated[str, Field(description="one line for the operators")],
        ctx: Context,
    ) -> dict[str, Any]:
        return await _run(ctx, _stop, ticket=ticket, reason=reason)

    return close_arguments(server)
