"""Facts: what one app states once and any number of others act on.

The app that states a fact (sessions: a turn ended) does not know who listens; each app
that acts on it subscribes by name when it loads. Publishing writes one outbox row per
subscriber in the publisher's transaction (one statement), so each subscriber's work is
durable, retried and dead-lettered on its own: a failing subscriber holds back no other.

A subscriber may say which facts it wants (`wants`, a pure look at the payload) so a fact
most subscribers ignore costs no row for them. Subscribing twice under one name is an error,
as is a second outbox handler for a fact's kind: nothing replaces a listener silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from effects import outbox

Handler = Callable[[int, dict], None]
Wants = Callable[[dict], bool]

# A fact is an effect kind whose rows carry the subscriber's name (effects/kinds.py holds
# its retry rules like any kind's).
FACTS = frozenset({"session.turn_ended"})
SUBSCRIBER = "subscriber"  # the payload members naming whose row it is, and of what
FACT = "fact"


@dataclass(frozen=True)
class Subscriber:
    name: str
    handler: Handler
    wants: Wants | None = None


_subscribers: dict[str, dict[str, Subscriber]] = {fact: {} for fact in FACTS}


def _fact(fact: str) -> dict[str, Subscriber]:
    if fact not in FACTS:
        raise outbox.EffectError(f"unknown fact {fact!r}; expected one of {sorted(FACTS)}")
    return _subscribers[fact]


def subscribe(fact: str, name: str, *, wants: Wants | None = None
              ) -> Callable[[Handler], Handler]:
    """Act on every published `fact` as `name`: `handler(effect_id, payload)`, idempotent
    per effect id like any outbox handler. `wants(payload)` false: no row is written."""
    subscribers = _fact(fact)
    if not name or not name.isidentifier():
        raise ImproperlyConfigured(f"a subscriber's name is an identifier, not {name!r}")

    def decorate(handler: Handler) -> Handler:
        known = subscribers.get(name)
        if known is not None and outbox.handler_name(known.handler) != outbox.handler_name(
                handler):
            raise ImproperlyConfigured(
                f"{fact!r} already has a subscriber named {name!r}"
                f" ({outbox.handler_name(known.handler)})")
        subscribers[name] = Subscriber(name, handler, wants)
        return handler

    return decorate


def subscribers(fact: str) -> list[str]:
    return sorted(_fact(fact))


def publish(fact: str, key: str, payload: dict) -> int:
    """State `fact` in the caller's transaction; each subscriber that wants it gets its own
    row, keyed `<subscriber>:<key>`. Returns how many rows were written."""
    rows = _rows(fact, key, payload)
    outbox.enqueue_many(fact, rows)
    return len(rows)


def publish_statement(fact: str, key: str, payload: dict):
    """`publish`'s one statement (None when no subscriber wants it), for the caller to send
    with its own writes in one round trip in this transaction (fast_writes.send)."""
    return outbox.enqueue_many_statement(fact, _rows(fact, key, payload))[0]


def _rows(fact: str, key: str, payload: dict) -> list[tuple[str, dict]]:
    return [(f"{sub.name}:{key}", {**payload, FACT: fact, SUBSCRIBER: sub.name})
            for sub in _fact(fact).values() if sub.wants is None or sub.wants(payload)]


def deliver(effect_id: int, payload: dict) -> None:
    """The outbox handler of every fact's rows: the named subscriber acts on it. A row for a
    subscriber this installation no longer has fails (and ends a dead letter naming it)."""
    fact, name = payload.get(FACT), payload.get(SUBSCRIBER)
    sub = _subscribers.get(fact, {}).get(name)
    if sub is None:
        raise outbox.EffectError(f"no subscriber {name!r} of {fact!r} in this installation")
    sub.handler(effect_id, payload)


def wire() -> None:
    """Register `deliver` as the outbox handler of each fact (EffectsConfig.ready)."""
    for fact in FACTS:
        outbox.register(fact)(deliver)
