"""Who takes what intake recorded: one registry, declared in one place.

Intake knows sources, threads and triggers; what a trigger means — a ticket's follow-up, a
new ticket, a message for a conversation session, a connector's input — is its consumer's
business. Consumers register at start-up (tickets: `TicketsConfig.ready()` registers
tickets/consumer.py as the default; conversations claims the Lark sources in a conversation
mode), and intake calls the source's consumer inside the transaction that records the trigger,
so the trigger and what became of it commit together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class Consumer(Protocol):
    def locate(self, source, result):
        """The translated event, re-addressed to the thread it concerns (a CI result on a
        pull request's head → the followed pull request's thread), or an `ignored`
        result (intake/rules.py) when it concerns nobody."""

    def thread_state_reported(self, source, thread, facts: dict) -> None:
        """The thread's own state was reported (`pr_state`, `issue_state`, …); the
        thread's meta is updated already and the thread is locked."""

    def route_new(self, trigger, acceptance: str | None) -> str:
        """Route an unsaved trigger that has the gate's decision: choose the route, set
        its disposition, `save(force_insert=True)` it, take the route; returns the
        disposition."""

    def followed_pull_requests(self, source) -> list[dict]:
        """The open pull requests of `source` someone follows, `{"thread", "head_sha"}`
        (the catch-up poll reads their CI by commit)."""


@runtime_checkable
class Acknowledges(Protocol):
    """A consumer that acknowledges events itself (a goal agent's async inbox)."""

    def acknowledgement(self, trigger) -> str | None:
        """None when it does not hold `trigger`, "" while it holds it unacknowledged, else
        the outcome it was acknowledged with."""


@runtime_checkable
class FollowsChats(Protocol):
    """A consumer that listens on chats of its own besides the source's configured groups
    (a goal agent's Lark Bot connection names its chat)."""

    def followed_chats(self, source) -> list[str]:
        """The chat ids of `source` it listens on (the catch-up poll reads their history)."""


class NoConsumer(RuntimeError):
    pass


# The default consumer (tickets) takes every source no other consumer claims; a consumer
# registered with `claims` (conversations: a Lark source in a conversation mode) takes the
# sources it claims. One source has one consumer, so one message never feeds two.
_consumer: Consumer | None = None
_claimed: list[tuple[Callable[[object], bool], Consumer]] = []


def _check(consumer) -> None:
    if not isinstance(consumer, Consumer):
        missing = [name for name in ("locate", "thread_state_reported", "route_new",
                                     "followed_pull_requests")
                   if not callable(getattr(consumer, name, None))]
        raise TypeError(f"{type(consumer).__name__} is not an intake consumer: it lacks "
                        f"{', '.join(missing)}")


def register(consumer: Consumer, *, claims: Callable[[object], bool] | None = None) -> None:
    """Declare a consumer of recorded triggers (once, at start-up): the default one, or,
    with `claims(source) -> bool`, the consumer of the sources it claims."""
    global _consumer
    _check(consumer)
    if claims is not None:
        _claimed[:] = [(c, k) for c, k in _claimed if type(k) is not type(consumer)]
        _claimed.append((claims, consumer))
        return
    if _consumer is not None and type(_consumer) is not type(consumer):
        raise RuntimeError(f"intake already has a consumer ({type(_consumer).__name__})")
    _consumer = consumer


def of(source) -> Consumer:
    """The consumer of `source`'s triggers."""
    for claims, consumer in _claimed:
        if claims(source):
            return consumer
    if _consumer is None:
        raise NoConsumer("no app registered an intake consumer (tickets does in its ready())")
    return _consumer


def followed_chats(source) -> list[str]:
    """The chats `source`'s consumer listens on besides its configured groups."""
    consumer = of(source)
    return list(consumer.followed_chats(source)) if isinstance(consumer, FollowsChats) else []


def acknowledgement(trigger) -> str | None:
    """Whether a consumer that acknowledges events itself (a goal agent's async inbox)
    holds `trigger`: None when none does (intake's own rule acknowledges it), "" while
    one holds it unacknowledged, else the outcome it was acknowledged with. Asked of every
    registered consumer that answers it, whichever claims the source now: a connector
    disconnected since keeps what its inbox took."""
    for consumer in [c for _, c in _claimed] + ([_consumer] if _consumer else []):
        if isinstance(consumer, Acknowledges):
            held = consumer.acknowledgement(trigger)
            if held is not None:
                return held
    return None
