"""What an agent may do with its own token (pure: no Django, no I/O).

An attached agent's own loop (its automation prompt, not amux) reads and writes its goal's
todos through the same REST resource operators use, authenticated by a token amux issued
for one working-session binding. The token lives as long as that binding: detaching ends
it. It reaches only its own goal's todos, claims only for its own agent, never takes a todo
another agent holds and never drops one (dropping is the owner's decision). Everything else
(transitions, evidence for done) is the todo lifecycle's rule, the same for everyone."""

from __future__ import annotations

import hashlib
import secrets

from goals.core.lifecycle import Refused

TOKEN_PREFIX = "amxg_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """What amux stores: the token itself is only in the agent's token file."""
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_agent_token(token: str) -> bool:
    return token.startswith(TOKEN_PREFIX)


def token_refusal(*, binding_active: bool, token_goal: str, goal: str,
                  token_agent: str = "", agent: str | None = None) -> Refused | None:
    """A known token: usable while its binding is active, only on its own goal and, where
    the path names an agent (its inbox), only on its own agent."""
    if not binding_active:
        return Refused("this agent token's working session was detached",
                       code="token_ended", status=403)
    if token_goal != goal:
        return Refused("an agent token reaches only its own goal",
                       code="other_goal", status=403)
    if agent is not None and agent != token_agent:
        return Refused("an agent token reaches only its own agent's inbox",
                       code="other_agent", status=403)
    return None


def todo_change_refusal(*, agent: str, claimed_by: str | None, target_state: str | None,
                        named_agent: str | None) -> Refused | None:
    """A todo change an agent asks for (None: the lifecycle rule decides the rest)."""
    if named_agent not in (None, "", agent):
        return Refused("an agent claims todos only for itself", code="other_agent",
                       status=403, field="agent")
    if claimed_by not in (None, "", agent):
        return Refused("another agent holds this todo", code="claimed_elsewhere",
                       status=409)
    if target_state == "dropped":
        return Refused("dropping a todo is the owner's decision", code="owner_decision",
                       status=403, field="state")
    return None
