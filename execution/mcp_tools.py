"""The caller tools on amux's MCP server (/mcp, amux_site/mcp.py routes by token): for a
program holding an amux API token (``manage.py amux token --user NAME``), and — with the
memory tools beside them — for a session holding its own session credential
(``build_server(session=True)``: it acts as its owner, execution.session_tools). Each call
resolves the token again from its own HTTP request, so it always acts as that token's user
(or that session's owner). Tool logic, validation and ownership: execution.caller_tools."""

from __future__ import annotations

from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from amux_common.mcp_http import bearer, close_arguments
from execution import caller_tools, session_tools
from execution.caller_tools import DESCRIPTIONS
from sessions.services import CommandError

INSTRUCTIONS = (
    "amux runs coding agents (Codex, Claude, Pi, ACP agents) for you. `session_run` runs a "
    "prompt in a session and returns the answer; `task_run` gives a bounded task and waits, "
    "`task_submit` returns at once (read it with `task_get`); `instance_spawn` creates a "
    "persistent agent. Runtime, model and expert (`profile`) are separate inputs."
)
SESSION_INSTRUCTIONS = INSTRUCTIONS + (
    " They act as this session's owner. `memory_search` and `memory_read` read the "
    "long-term memory amux keeps for this session's owner (when memory is on)."
)
MEMORY_DESCRIPTIONS = {
    "memory_search": ("Search the long-term memory amux keeps for you: a few words; "
                      "answers ids, titles and snippets (read one with memory_read)."),
    "memory_read": "Read one memory entry whole, by the id memory_search gave.",
}


class NotAuthenticated(Exception):
    """No valid API token on the request."""


def api_user(token: str | None):
    """The active user of this knox API token, or None."""
    if not token:
        return None
    from knox.auth import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    try:
        user, _ = TokenAuthentication().authenticate_credentials(token.encode())
    except (AuthenticationFailed, UnicodeError):
        return None
    return user


def _call(token: str | None, fn, kwargs, as_session: bool) -> dict:
    close_old_connections()
    try:
        if as_session:  # fn: the tool's name
            try:
                if fn in session_tools.MEMORY_TOOLS:
                    return session_tools.memory_call(token, fn, kwargs)
                return session_tools.call_as_owner(token, fn, kwargs)
            except session_tools.NotASession:
                raise NotAuthenticated from None
        user = api_user(token)
        if user is None:
            raise NotAuthenticated
        return fn(user, **kwargs)
    finally:
        close_old_connections()


async def _run(ctx: Context, fn, as_session: bool = False, **kwargs) -> dict:
    try:
        # not thread_sensitive: a call may wait minutes for an agent, in its own thread
        return await sync_to_async(_call, thread_sensitive=False)(
            bearer(ctx.headers), fn, kwargs, as_session)
    except NotAuthenticated:
        raise ToolError("refused (401 not_authenticated): an amux API token or a live "
                        "session's credential is required") from None
    except CommandError as exc:
        where = f", field {exc.field}" if exc.field else ""
        raise ToolError(f"refused ({exc.status} {exc.code}{where}): {exc}") from None


Runtime = Annotated[str | None, Field(description="the runtime: codex, claude, pi, acp …")]
Model = Annotated[str | None, Field(description="the native model name")]
Provider = Annotated[str | None, Field(description="the model provider's slug")]
Profile = Annotated[str | None, Field(description="the expert: an Agent Profile's slug")]
ExtraArgs = Annotated[list[str] | None, Field(description="native arguments for the runtime")]
Policy = Annotated[str | None, Field(description="policy-allow (default), policy-deny, bypass")]
Instance = Annotated[int | None, Field(description="run on this persistent instance of yours")]
Timeout = Annotated[float | None, Field(description="seconds to wait (default 600, max 3600)")]
Prompt = Annotated[str, Field(description="what the agent should do")]


def build_server(*, session: bool = False) -> MCPServer:
    """The caller tools for an API token; ``session``: for a session's credential, acting
    as its owner, with the memory tools."""
    server = MCPServer("amux", instructions=SESSION_INSTRUCTIONS if session else INSTRUCTIONS,
                       version="1", log_level="WARNING", subscriptions=False)

    def tool(fn):  # the tool's logic, or (a session's) its name for session_tools
        return fn.__name__ if session else fn

    async def run(ctx: Context, fn, **kwargs) -> dict:
        return await _run(ctx, tool(fn), as_session=session, **kwargs)

    @server.tool(name="session_run", description=DESCRIPTIONS["session_run"])
    async def session_run(prompt: Prompt, ctx: Context, runtime: Runtime = None,
                          model: Model = None, provider: Provider = None,
                          profile: Profile = None, extra_args: ExtraArgs = None,
                          session: Annotated[int | None, Field(
                              description="continue this session of yours")] = None,
                          timeout_s: Timeout = None) -> dict[str, Any]:
        return await run(ctx, caller_tools.session_run, prompt=prompt, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, session=session, timeout_s=timeout_s)

    @server.tool(name="task_run", description=DESCRIPTIONS["task_run"])
    async def task_run(prompt: Prompt, ctx: Context, runtime: Runtime = None,
                       model: Model = None, provider: Provider = None,
                       profile: Profile = None, extra_args: ExtraArgs = None,
                       permission_policy: Policy = None, instance: Instance = None,
                       timeout_s: Timeout = None) -> dict[str, Any]:
        return await run(ctx, caller_tools.task_run, prompt=prompt, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, permission_policy=permission_policy,
                          instance=instance, timeout_s=timeout_s)

    @server.tool(name="task_submit", description=DESCRIPTIONS["task_submit"])
    async def task_submit(prompt: Prompt, ctx: Context, runtime: Runtime = None,
                          model: Model = None, provider: Provider = None,
                          profile: Profile = None, extra_args: ExtraArgs = None,
                          permission_policy: Policy = None,
                          instance: Instance = None) -> dict[str, Any]:
        return await run(ctx, caller_tools.task_submit, prompt=prompt, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, permission_policy=permission_policy,
                          instance=instance)

    @server.tool(name="task_get", description=DESCRIPTIONS["task_get"])
    async def task_get(task: Annotated[int, Field(description="the task's id")],
                       ctx: Context) -> dict[str, Any]:
        return await run(ctx, caller_tools.task_get, task=task)

    @server.tool(name="instance_spawn", description=DESCRIPTIONS["instance_spawn"])
    async def instance_spawn(name: Annotated[str, Field(description="the instance's name")],
                             ctx: Context, runtime: Runtime = None, model: Model = None,
                             provider: Provider = None, profile: Profile = None,
                             extra_args: ExtraArgs = None,
                             permission_policy: Policy = None) -> dict[str, Any]:
        return await run(ctx, caller_tools.instance_spawn, name=name, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, permission_policy=permission_policy)

    if session:
        @server.tool(name="memory_search", description=MEMORY_DESCRIPTIONS["memory_search"])
        async def memory_search(query: Annotated[str, Field(
                description="a few words to look for")], ctx: Context) -> dict[str, Any]:
            return await _run(ctx, "memory_search", as_session=True, query=query)

        @server.tool(name="memory_read", description=MEMORY_DESCRIPTIONS["memory_read"])
        async def memory_read(id: Annotated[int, Field(  # noqa: A002 - the tool's word
                description="the entry's id (from memory_search)")],
                              ctx: Context) -> dict[str, Any]:
            return await _run(ctx, "memory_read", as_session=True, entry_id=id)

    return close_arguments(server)
