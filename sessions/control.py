"""The control channel from web/API processes to a session's host: a Redis list per session.

Inputs themselves are durable rows (``Turn``); what travels here is a nudge ("input"),
"interrupt", permission and question answers, "sleep", "archive", and the runtime controls
"model" and "clear" (applied between turns, before any input queued after them). Answers are
claimed once with ``SET NX`` so a request is never answered twice.
"""

from __future__ import annotations

import json
from typing import Any

from amux_common.shared_redis import client

KEY = "amux:session:{id}:control"
ANSWERED = "amux:session:{id}:answered:{rid}"


def key(session_id: int) -> str:
    return KEY.format(id=session_id)


def send(session_id: int, op: str, **data: Any) -> None:
    client().rpush(key(session_id), json.dumps({"op": op, **data}))


def claim_answer(session_id: int, request_id: str) -> bool:
    """True for the first answer to ``request_id``; False if it was already answered."""
    return bool(client().set(ANSWERED.format(id=session_id, rid=request_id), "1", nx=True,
                             ex=7 * 24 * 3600))


def waiting(session_id: int, op: str) -> bool:
    """Whether a message of ``op`` waits in the session's control list."""
    return any(f'"op": "{op}"' in item.decode(errors="replace")
               for item in client().lrange(key(session_id), 0, -1))


def clear(session_id: int) -> None:
    client().delete(key(session_id))


async def pop(aclient: Any, session_id: int, timeout: float) -> dict[str, Any] | None:
    """Wait up to ``timeout`` seconds for the next control message (redis.asyncio client)."""
    item = await aclient.blpop([key(session_id)], timeout=max(timeout, 0.01))
    if item is None:
        return None
    try:
        return json.loads(item[1])
    except ValueError:
        return None


TURN_END = "turn_end"


async def mark_turn_end(aclient: Any, session_id: int, turn_id: int) -> None:
    """Close a turn's reading of the list: its reader stops when it pops this marker
    (redis.asyncio client). A blocking pop is never cancelled instead: a message Redis
    had already handed over to a cancelled pop would be lost."""
    await aclient.rpush(key(session_id), json.dumps({"op": TURN_END, "turn": turn_id}))


async def pop_now(aclient: Any, session_id: int) -> dict[str, Any] | None:
    """The next control message if one is waiting, without waiting."""
    item = await aclient.lpop(key(session_id))
    if item is None:
        return None
    try:
        return json.loads(item)
    except ValueError:
        return None
