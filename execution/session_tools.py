"""The tools a session reaches on amux's MCP server with its own session credential (the
one its runtime was launched with: ``sessions.model_credentials``, reissued at every
launch, revoked when the session is archived).

A session acts only as its owner (``sessions.ownership``): the caller tools
(``execution.caller_tools``) run as that user, with that user's checks (an operator only;
another's task or session is not found), and refuse when the session acts for nobody. A
task's child session gets no session or schedule tools (seed 000: restricted role), only
memory. ``memory_search`` and ``memory_read`` read the memory its binding names, checked
again on every call (``sessions.memory``)."""

from __future__ import annotations

from typing import Any

from execution import caller_tools
from sessions import memory, model_credentials
from sessions.models import Lifecycle, Session
from sessions.refusals import CommandError

CALLER_TOOLS = ("session_run", "task_run", "task_submit", "task_get", "instance_spawn")
MEMORY_TOOLS = ("memory_search", "memory_read")


class NotASession(Exception):
    """The bearer is no live session's credential."""


def session_of(token: str | None) -> Session | None:
    """The live (not archived) session a credential belongs to, or None."""
    grant = model_credentials.grant_for(token) if token else None
    if grant is None or grant.session_id is None:
        return None
    return (Session.objects.select_related("owner").exclude(lifecycle=Lifecycle.ARCHIVED)
            .filter(pk=grant.session_id).first())


def _session(token: str | None) -> Session:
    session = session_of(token)
    if session is None:
        raise NotASession
    return session


def call_as_owner(token: str | None, tool: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """One caller tool, run as the session's owner."""
    session = _session(token)
    role = ((session.snapshot or {}).get("execution") or {}).get("role")
    if role == "task":
        raise CommandError("a task's child session cannot start sessions or tasks: finish "
                           "the task and give the result as your final answer",
                           code="permission_denied", status=403)
    if session.owner is None or not session.owner.is_active:
        raise CommandError("this session acts for no amux user, so it cannot start "
                           "sessions or tasks", code="no_owner", status=403)
    if tool == "session_run" and kwargs.get("session") == session.pk:
        raise CommandError("a session cannot run a prompt in itself", field="session")
    return getattr(caller_tools, tool)(session.owner, **kwargs)


def memory_call(token: str | None, tool: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    session = _session(token)
    try:
        if tool == "memory_search":
            query = kwargs.get("query")
            if not isinstance(query, str):
                raise CommandError("query must be a string", field="query")
            return memory.search(session, query)
        entry_id = kwargs.get("entry_id")
        try:  # the `amux` command sends the id as it was typed
            entry_id = int(entry_id) if not isinstance(entry_id, bool) else None
        except (TypeError, ValueError):
            entry_id = None
        if entry_id is None or not 0 < entry_id < 2 ** 63:
            raise CommandError("id must be a memory entry id", field="id")
        return memory.read(session, entry_id)
    except memory.MemoryUnavailable as exc:
        status = {"not_found": 404, "invalid": 400}.get(exc.code, 409)
        raise CommandError(str(exc), code=exc.code, status=status) from exc
