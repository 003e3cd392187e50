"""Pure rules of the ticket aggregate: given its state, a command and `now`, what changes
and which effects to enqueue. No Django, no I/O, no clock."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime

from tickets.core.errors import InvalidCommand, TicketEnded

MAX_INPUT_CHARS = 100_000


@dataclass(frozen=True)
class EffectSpec:
    kind: str
    key: str
    payload: dict
    channel: str = ""


@dataclass(frozen=True)
class TicketView:
    """What the rules need to know about one ticket aggregate."""

    id: int
    ended: bool
    live_assignment: int | None = None


@dataclass(frozen=True)
class Plan:
    """The outcome of one command: the aggregate's field changes and the effects to enqueue."""

    changes: dict = field(default_factory=dict)
    effects: tuple[EffectSpec, ...] = ()


def short_name(ticket_id: int, title: str) -> str:
    """A readable, unique directory-safe name: `t<id>-<first words of the title>`."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    words = words[:40].rstrip("-")
    return f"t{ticket_id}-{words}" if words else f"t{ticket_id}"


def dispatch(assignment_id: int, ticket_id: int) -> EffectSpec:
    payload = {"assignment": assignment_id, "ticket": ticket_id}
    return EffectSpec("dispatch", f"assignment:{assignment_id}", payload)


def start_run(assignment_id: int, ticket_id: int, session_id: int) -> EffectSpec:
    """What a dispatch leaves to do outside the database once it has committed: the
    ticket's working copy (the clone), then the run's first message, which starts the
    worker's runtime in it. Both are idempotent: a replay clones nothing twice and posts
    the brief once (its input key)."""
    payload = {"assignment": assignment_id, "ticket": ticket_id, "session": session_id,
               "action": "start"}
    return EffectSpec("dispatch", f"assignment:{assignment_id}:start", payload)


def open_plan(ticket_id: int, assignment_id: int) -> Plan:
    return Plan(effects=(dispatch(assignment_id, ticket_id),))


def stop(view: TicketView, *, by: str, now: datetime) -> Plan:
    if view.ended:
        raise TicketEnded(f"ticket {view.id} has already ended")
    effects: tuple[EffectSpec, ...] = ()
    if view.live_assignment is not None:
        # A command, never coalesced with other work on the assignment: a key of its own.
        effects = (
            EffectSpec(
                "dispatch",
                f"assignment:{view.live_assignment}:stop",
                {"assignment": view.live_assignment, "ticket": view.id, "action": "stop"},
            ),
        )
    return Plan(
        changes={"ended_at": now, "end_reason": "stopped"},
        effects=effects,
    )


def add_input(view: TicketView, *, text: str) -> None:
    """Refuse what cannot become an input; the action then stores it and enqueues delivery."""
    if view.ended:
        raise TicketEnded(f"ticket {view.id} has ended; a new message on its thread revives it")
    if not text or not text.strip():
        raise InvalidCommand("text must not be empty")
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidCommand(f"text is longer than {MAX_INPUT_CHARS} characters")


def deliver(input_id: int, ticket_id: int) -> EffectSpec:
    return EffectSpec("deliver", f"input:{input_id}", {"input": input_id, "ticket": ticket_id})


def title_of(thread_title: str, text: str, scope: str, actor: str) -> str:
    """A new ticket's title: its thread's, else the request's first line, else who asked."""
    lines = (text or "").strip().splitlines()
    return thread_title or (lines[0][:120] if lines else "") or f"{scope} from {actor}"


def reply_key(assignment_id: int, text: str) -> tuple[str, str]:
    """The effect key and message id of an executor's reply: the run and the text, so an
    ask repeated after a crash is the same message."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    return f"reply:{assignment_id}:{digest}", f"reply-{assignment_id}-{digest}"
