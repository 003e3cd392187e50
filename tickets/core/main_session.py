"""The main session's rules (seed 002, path B and role separation), pure.

Which router decides an explicit request: the team's main session when a main runtime is
configured, else amux's deterministic code (today's route: an explicit request opens a
ticket at once). Either way the ticket, its mandate, its subscription and its first run
are made by the same action, so the outcome does not depend on who routed.

The main session routes, it never plans: its routing note is at most 30 words (where to
look, never what to build) and a longer one is refused whole, never cut. While a ticket's
executor owns a message (a follow-up on its thread) the main session may stop that ticket
but not take the message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tickets.core.errors import CommandRefused, InvalidCommand
from tickets.core.routing import Route
from tickets.core.rules import EffectSpec

NOTE_MAX_WORDS = 30
REASON_MAX_CHARS = 300
AWAITING = "routing"  # an explicit request's disposition while the main session decides
DISMISSED = "dismissed"


class Router(StrEnum):
    MAIN = "main"  # the team's main session (a real runtime) decides
    CODE = "code"  # deterministic routing: the fallback with no main runtime configured


class OwnedByExecutor(CommandRefused):
    status = 409
    code = "owned_by_executor"


class NotAwaiting(CommandRefused):
    status = 409
    code = "not_awaiting_routing"


def router(main_configured: bool) -> Router:
    return Router.MAIN if main_configured else Router.CODE


def hands_to_main(taken: Route, main_configured: bool) -> bool:
    """An explicit request waits for the main session instead of opening a ticket now."""
    return taken is Route.OPEN and main_configured


def notifies_main(taken: Route, main_configured: bool, is_human: bool) -> bool:
    """A person's follow-up reaches its ticket's executor (path B) and the main session
    hears of it, so it can stop the ticket; bots' and CI's messages are context only."""
    return main_configured and is_human and taken in (Route.FOLLOW_UP, Route.REVIVE)


def check_note(note) -> str:
    """The routing note as given (whitespace folded), or refused: not text, or longer than
    30 words. Never truncated: a cut note would be a different note nobody wrote."""
    if note is None:
        return ""
    if not isinstance(note, str):
        raise InvalidCommand("note must be text")
    words = note.split()
    if len(words) > NOTE_MAX_WORDS:
        raise InvalidCommand(
            f"note has {len(words)} words; a routing note is at most {NOTE_MAX_WORDS} words "
            "(where to look, never what to build): shorten it and route again")
    return " ".join(words)


def check_reason(reason, name: str = "reason") -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidCommand(f"{name} must be a non-empty line of text")
    reason = " ".join(reason.split())
    if len(reason) > REASON_MAX_CHARS:
        raise InvalidCommand(f"{name} is at most {REASON_MAX_CHARS} characters")
    return reason


def check_id(value, name: str) -> int:
    """An id the model named: a positive integer (a digit string is accepted)."""
    if isinstance(value, bool):
        raise InvalidCommand(f"{name} must be an id (a positive integer)")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidCommand(f"{name} must be an id (a positive integer)") from None
    if number <= 0 or (isinstance(value, float) and value != number):
        raise InvalidCommand(f"{name} must be an id (a positive integer)")
    return number


@dataclass(frozen=True)
class TriggerFacts:
    id: int
    disposition: str
    decision: str
    owner_ticket: int | None = None  # the live ticket subscribed to its thread, if any


def check_routable(f: TriggerFacts) -> None:
    """The main session may route a trigger only while it awaits routing; a message the
    executor owns is never taken (the main session may stop that ticket instead)."""
    if f.disposition == AWAITING and f.decision == "explicit":
        return
    if f.owner_ticket is not None:
        raise OwnedByExecutor(
            f"trigger {f.id} belongs to the executor of ticket {f.owner_ticket}; you may "
            f"stop that ticket (stop), not take its message")
    if f.decision != "explicit":
        raise NotAwaiting(f"trigger {f.id} is not an explicit request; inferred candidates "
                          "are judged by triage, never routed by the main session")
    raise NotAwaiting(f"trigger {f.id} does not await routing (it is {f.disposition or 'new'})")


def request_notice(*, trigger: int, actor: str, source: str, thread: str, url: str,
                   text: str) -> str:
    where = f"{thread} ({url})" if url else thread
    return "\n".join([
        f"Explicit request: trigger {trigger} from {actor} on {source}, thread {where}.",
        "The message:", text.strip() or "(empty)", "",
        f"Route it with route(trigger={trigger}, note=...) — the note is at most "
        f"{NOTE_MAX_WORDS} words, where to look, never a plan — or dismiss it with a "
        "one-line reason.",
    ])


def followup_notice(*, trigger: int, ticket: int, actor: str, thread: str, text: str) -> str:
    return "\n".join([
        f"Follow-up on {thread} from {actor}, delivered to ticket {ticket} (trigger "
        f"{trigger}). Its executor owns this message: do not route or answer it.",
        "The message:", text.strip() or "(empty)", "",
        f"If the ticket must end, call stop(ticket={ticket}, reason=...); otherwise do "
        "nothing.",
    ])


def notify(trigger: int, what: str, ticket: int | None = None) -> EffectSpec:
    """Tell the main session of an explicit request (`request`) or of a person's follow-up
    on a ticket's thread (`follow_up`), once per trigger."""
    return EffectSpec("main.notify", f"trigger:{trigger}",
                      {"trigger": trigger, "what": what, "ticket": ticket})


def notice_key(trigger: int) -> str:
    """The main session's input key of the notice about one trigger (one turn each)."""
    return f"main:trigger:{trigger}"


def told_trigger(turn_key: str | None) -> int | None:
    """The trigger a main-session turn was about, from its input key, or None."""
    prefix, _, rest = (turn_key or "").rpartition(":")
    if prefix != "main:trigger" or not rest.isdigit():
        return None
    return int(rest)
