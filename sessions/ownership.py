"""Who a session acts for and whose memory it may read: decided here, once, for every kind
of session, and frozen in its snapshot when ``services.create_session`` makes it.

Every session gets amux's MCP server (``sessions.session_mcp``), reached with its own
session credential. Its caller tools (``session_run``, ``task_run`` …) act as the session's
owner (``Session.owner``) and are still checked as that user's own calls (an operator
only; another's task or session is not found); its memory tools read the memory owner's
entries when amux's memory is on (``sessions.memory``).

- direct (``POST sessions/``, MCP ``session_run``), task, schedule and instance sessions:
  the caller who made them (a schedule's and an instance's owner);
- a goal's agent: the operator who started it;
- a Lark direct chat: the amux user the Lark person in it maps to; a group's topic or a
  bot's one conversation (many people write there): nobody, and the team's memory;
- a ticket's worker: acts for nobody (its tools are the ticket's, through its assignment
  token), and reads the memory of the amux user its requester maps to.

A person of a source (a Lark open id, a GitHub login) maps to an amux user only through the
team's identities skill (``skill.identities``), never by a name that happens to match (a
stranger's GitHub login may be an amux username): a line that names the identity and
exactly one amux username, e.g. ``Lark ou_3f2 is GitHub octocat, amux alice``. Unmapped,
memory falls back to the team's (the user named by ``AMUX_MEMORY_TEAM``), and to none
without one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q

from prompts_app import service as prompts

IDENTITIES = "skill.identities"
_WORD = re.compile(r"[\w.@\[\]-]+")


@dataclass(frozen=True)
class Scope:
    """``owner``: the user the session's caller tools act as (None: nobody);
    ``memory_owner``: the user whose memory it reads; ``via``: how that was found."""

    kind: str = "other"
    owner: int | None = None
    memory_owner: int | None = None
    via: str = "none"

    def snapshot(self) -> dict[str, Any]:
        return {"kind": self.kind, "owner": self.owner, "memory_owner": self.memory_owner,
                "via": self.via}


def of_caller(kind: str, user: Any) -> Scope:
    """A session someone made (directly, as a task, a schedule, an instance, a goal's
    agent): it acts for them and reads their memory."""
    if user is None or getattr(user, "pk", None) is None:
        return Scope(kind)
    return Scope(kind, user.pk, user.pk, "caller")


def of_person(kind: str, identity: str, *, acts: bool) -> Scope:
    """A session for a person of a source (a Lark person, a ticket's requester): the amux
    user they map to; ``acts``: its caller tools act as that user (a Lark conversation),
    else as nobody (a ticket's worker). Unmapped: the team's memory, acting for nobody."""
    user, via = person_user(identity)
    if user is not None:
        return Scope(kind, user.pk if acts else None, user.pk, via)
    team = team_user()
    if team is not None:
        return Scope(kind, None, team.pk, "team")
    return Scope(kind)


def of_shared_place(kind: str) -> Scope:
    """A session many people write to (a Lark group's topic, a bot's one conversation):
    any member may steer it, so it acts for nobody and reads the team's memory, never the
    memory of whoever happened to write first."""
    team = team_user()
    return Scope(kind, None, team.pk, "team") if team is not None else Scope(kind)


def _active(username: str):
    return (get_user_model().objects.filter(username__iexact=username, is_active=True)
            .first())


def person_user(identity: str) -> tuple[Any, str]:
    """The amux user the identities skill maps a source identity to, and how
    (``identities``); (None, "none") when no line names it with exactly one amux user."""
    identity = (identity or "").strip()
    if not identity:
        return None, "none"
    text = prompts.fragment(IDENTITIES).get("text") or ""
    wanted = identity.lower()
    for line in text.splitlines():
        words = {w.strip(".,;:").lower() for w in _WORD.findall(line)} - {""}
        if wanted not in words:
            continue
        names = Q()
        for word in words - {wanted}:
            names |= Q(username__iexact=word)
        found = {u.pk: u for u in get_user_model().objects.filter(names, is_active=True)}
        if len(found) == 1:
            return next(iter(found.values())), "identities"
    return None, "none"


def team_user():
    """The user whose memory is the team's (``AMUX_MEMORY_TEAM``), or None."""
    name = (settings.AMUX_MEMORY_TEAM or "").strip()
    return _active(name) if name else None


def session_scope(snapshot: dict[str, Any] | None) -> dict[str, Any]:
    return (snapshot or {}).get("scope") or Scope().snapshot()
