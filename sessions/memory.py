"""On-demand memory (seed 000 按需系统记忆): entries stay in amux, owned by one user; a
session gets only the fixed protocol at launch (``runtimes.launch_context``), and only its
explicit tool calls (``memory_search``, ``memory_read``) bring pieces of memory into it.

The binding (enabled or not, whose memory) is derived when the session is created and
frozen in its snapshot (``execution.memory``): a restart or resume reuses it, and a session
created without one needs a new session to get memory. Each tool call is still checked
against the current state (memory switched off since, the entry deleted)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q

from runtimes import get_adapter
from sessions.models import MemoryEntry, Session

SEARCH_LIMIT = 10
SNIPPET = 160


class MemoryUnavailable(Exception):
    """A tool call the session's binding does not allow; ``code`` says why."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def binding(runtime: str, owner_id: int | None) -> dict[str, Any]:
    """The memory binding a new session gets: on when amux's memory setting is on, the
    runtime can honour the protocol (Codex, Claude, Pi) and the session has an owner."""
    if not settings.AMUX_MEMORY:
        return {"enabled": False, "reason": "memory_off"}
    if not get_adapter(runtime).launch_capabilities()["memory"]:
        return {"enabled": False, "reason": "memory_unavailable",
                "message": f"runtime {runtime!r} cannot honour amux's memory protocol"}
    if owner_id is None:
        return {"enabled": False, "reason": "no_owner"}
    return {"enabled": True, "owner": owner_id}


def session_binding(session: Session) -> dict[str, Any]:
    return ((session.snapshot or {}).get("execution") or {}).get("memory") or {
        "enabled": False, "reason": "not_bound"}


def _owner(session: Session) -> int:
    bound = session_binding(session)
    if not bound.get("enabled"):
        raise MemoryUnavailable(
            "memory_unavailable", "memory is not enabled for this session "
            f"({bound.get('reason', 'not bound')}); a new session gets it once it is on")
    if not settings.AMUX_MEMORY:
        raise MemoryUnavailable("memory_off", "amux's memory has been switched off")
    return int(bound["owner"])


def search(session: Session, query: str) -> dict[str, Any]:
    """Entries of the session's owner whose title or text holds every word of ``query``:
    ids, titles and a short snippet (read one whole with ``read``)."""
    words = [w for w in (query or "").split() if w][:8]
    if not words:
        raise MemoryUnavailable("invalid", "query must hold at least one word")
    found = MemoryEntry.objects.filter(owner_id=_owner(session))
    for word in words:
        found = found.filter(Q(title__icontains=word) | Q(text__icontains=word))
    return {"results": [{"id": e.pk, "title": e.title, "snippet": e.text[:SNIPPET],
                         "updated_at": e.updated_at.isoformat()}
                        for e in found[:SEARCH_LIMIT]]}


def read(session: Session, entry_id: int) -> dict[str, Any]:
    entry = MemoryEntry.objects.filter(owner_id=_owner(session), pk=entry_id).first()
    if entry is None:
        raise MemoryUnavailable("not_found", f"no memory entry {entry_id}")
    return {"id": entry.pk, "title": entry.title, "text": entry.text,
            "updated_at": entry.updated_at.isoformat()}
