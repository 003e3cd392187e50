"""The caller tools on amux's MCP server (/mcp, amux_site/mcp.py routes by token): for a
program holding an amux API token (``manage.py amux token --user NAME``). Each call
resolves the token again from its own HTTP request, so it always acts as that token's user.
Tool logic, validation and ownership: sessions.caller_tools."""

from __future__ import annotations

from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from amux_common.mcp_http import bearer, close_arguments
from sessions import caller_tools
from sessions.caller_tools import DESCRIPTIONS
from sessions.services import CommandError

INSTRUCTIONS = (
    "amux runs coding agents (Codex, Claude, Pi, ACP agents) for you. `session_run` runs a "
    "prompt in a session and returns the answer; `task_run` gives a bounded task and waits, "
    "`task_submit` returns at once (read it with `task_get`); `instance_spawn` creates a "
    "persistent agent. Runtime, model and expert (`profile`) are separate inputs."
)


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


def _call(token: str | None, fn, kwargs) -> dict:
    close_old_connections()
    try:
        user = api_user(token)
        if user is None:
            raise NotAuthenticated
        return fn(user, **kwargs)
    finally:
        close_old_connections()


async def _run(ctx: Context, fn, **kwargs) -> dict:
    try:
        # not thread_sensitive: a call may wait minutes for an agent, in its own thread
        return await sync_to_async(_call, thread_sensitive=False)(
            bearer(ctx.headers), fn, kwargs)
    except NotAuthenticated:
        raise ToolError("refused (401 not_authenticated): an amux API token is "
                        "required") from None
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


def build_server() -> MCPServer:
    server = MCPServer("amux", instructions=INSTRUCTIONS, version="1", log_level="WARNING",
                       subscriptions=False)

    @server.tool(name="session_run", description=DESCRIPTIONS["session_run"])
    async def session_run(prompt: Prompt, ctx: Context, runtime: Runtime = None,
                          model: Model = None, provider: Provider = None,
                          profile: Profile = None, extra_args: ExtraArgs = None,
                          session: Annotated[int | None, Field(
                              description="continue this session of yours")] = None,
                          timeout_s: Timeout = None) -> dict[str, Any]:
        return await _run(ctx, caller_tools.session_run, prompt=prompt, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, session=session, timeout_s=timeout_s)

    @server.tool(name="task_run", description=DESCRIPTIONS["task_run"])
    async def task_run(prompt: Prompt, ctx: Context, runtime: Runtime = None,
                       model: Model = None, provider: Provider = None,
                       profile: Profile = None, extra_args: ExtraArgs = None,
                       permission_policy: Policy = None, instance: Instance = None,
                       timeout_s: Timeout = None) -> dict[str, Any]:
        return await _run(ctx, caller_tools.task_run, prompt=prompt, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, permission_policy=permission_policy,
                          instance=instance, timeout_s=timeout_s)

    @server.tool(name="task_submit", description=DESCRIPTIONS["task_submit"])
    async def task_submit(prompt: Prompt, ctx: Context, runtime: Runtime = None,
                          model: Model = None, provider: Provider = None,
                          profile: Profile = None, extra_args: ExtraArgs = None,
                          permission_policy: Policy = None,
                          instance: Instance = None) -> dict[str, Any]:
        return await _run(ctx, caller_tools.task_submit, prompt=prompt, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, permission_policy=permission_policy,
                          instance=instance)

    @server.tool(name="task_get", description=DESCRIPTIONS["task_get"])
    async def task_get(task: Annotated[int, Field(description="the task's id")],
                       ctx: Context) -> dict[str, Any]:
        return await _run(ctx, caller_tools.task_get, task=task)

    @server.tool(name="instance_spawn", description=DESCRIPTIONS["instance_spawn"])
    async def instance_spawn(name: Annotated[str, Field(description="the instance's name")],
                             ctx: Context, runtime: Runtime = None, model: Model = None,
                             provider: Provider = None, profile: Profile = None,
                             extra_args: ExtraArgs = None,
                             permission_policy: Policy = None) -> dict[str, Any]:
        return await _run(ctx, caller_tools.instance_spawn, name=name, runtime=runtime,
                          model=model, provider=provider, profile=profile,
                          extra_args=extra_args, permission_policy=permission_policy)

    return close_arguments(server)
