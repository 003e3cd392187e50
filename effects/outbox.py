"""The durable outbox: decide, store, then do (ARCHITECTURE.md "Effects").

Every side effect is first an `Effect` row written in the same transaction as the decision
that caused it, then executed by a drainer after commit (and by a periodic sweep, so a lost
wake-up only delays). One pending row per (kind, key): enqueueing the same key again
replaces the payload and makes it due now without changing its place in line (its id). A
handler gets the effect's id as its idempotency key; it raises `Later` for "not now", any
other exception counts as a failed attempt (exponential backoff with jitter, then a dead
letter that an operator can retry from the admin).

Rows of the ordered kinds (effects/kinds.py: relay, notice, a session's queued ingress)
are ordered per channel: a row runs only when no earlier pending row of its channel exists,
so a failing or waiting head (`Later`) holds back the rows behind it while other channels
proceed. A dead letter no longer holds its channel. Relays and notices share channels
because both make their keys with `channel_key` (one place someone is spoken to: a source
and an address on it); another ordered kind names its channels apart (goals/queue.py).

Any app may write effects (tickets, sessions, what comes next); this module imports none of
them. The app that owns a kind's work registers its handler when it loads. A row whose
kind has no handler in this process is never claimed: it waits, visible in the admin,
until a process that has the handler drains it.

How a drainer works (Sentry's hybrid-cloud outbox is the model):

- claim: one short transaction. Drainers take turns (each locks the one `ClaimTurn` row,
  `select_for_update`), so the per-kind concurrency counts are exact; for each kind with
  room the drainer picks due rows with `select_for_update(skip_locked=True)`, in order,
  and leases them (`claimed_by`, `claimed_until`). SQLite has no row locks; its write
  transactions (`transaction_mode` IMMEDIATE in settings) serialise claims instead.
- run: the drainer runs its rows one at a time. Before each it checks that at least half
  of the lease is left (else it renews it, or skips a row it no longer holds), so two
  handlers never run for one effect as long as a handler finishes within half its lease.
  The drain task's hard time limit bounds every handler, so loading the settings refuses
  a time limit that is not under half the shortest lease (effects/kinds.py).
- settle: finished rows are deleted in bulk, at most FLUSH_SECONDS after they finish (a
  row with a channel at once: the next row of its channel waits for that delete). A row
  whose payload was replaced while its handler ran is released instead, so the new payload
  runs too. A drainer that dies loses nothing: its leases expire and another drainer runs
  the rows again, which is why handlers must be idempotent per effect id.

Per-kind concurrency counts drainers: at most `concurrency` drainers hold leases of one
kind at a time, and each runs one handler at a time.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from amux_common import fast_writes
from amux_common.wakeups import Wakeup
from effects import kinds as rules
from effects.kinds import KINDS, ORDERED_KINDS, KindPolicy
from effects.models import ClaimTurn, Effect, EffectState, new_version

log = logging.getLogger(__name__)


class Later(Exception):  # noqa: N818 - a signal, not an error
    """Not now (no free worker slot, a peer is busy): try again after `delay` seconds.

    Not a failure: the attempt count does not change and the row keeps its place."""

    def __init__(self, delay: float = 5.0, reason: str = ""):
        super().__init__(reason or "later")
        self.delay = delay


class EffectError(ValueError):
    """Bad input to the outbox: an unknown kind or a payload that cannot be stored."""


MAX_KEY = 300
MAX_CHANNEL = 300
FLUSH_SECONDS = 1.0  # finished rows are deleted at the latest this long after they finish
DRAIN_TASK = "effects.drain_outbox"
KICK = Wakeup("amux:outbox:kick", 10, DRAIN_TASK)
KICK_FLAG = KICK.flag

Handler = Callable[[int, dict], None]
_handlers: dict[str, Handler] = {}


def register(kind: str, *, replace: bool = False) -> Callable[[Handler], Handler]:
    """Declare the handler of one effect kind: `fn(effect_id, payload)`. A kind has one
    handler: a second one is an error unless `replace` says so (a test's stand-in).

    It must be idempotent per effect id (a replay after a crash may call it again). Rows
    of a kind without a handler are not claimed: they wait, visible in the admin. The app
    that owns the work registers it when it loads, so every process of one installation
    (same INSTALLED_APPS) has the same handlers."""
    _check_kind(kind)

    def decorate(fn: Handler) -> Handler:
        known = _handlers.get(str(kind))
        if known is not None and not replace and handler_name(known) != handler_name(fn):
            raise ImproperlyConfigured(
                f"effect kind {kind!r} already has a handler ({handler_name(known)});"
                f" {handler_name(fn)} would silently replace it. A fact several apps act"
                f" on is published through effects.events, one subscriber each.")
        _handlers[str(kind)] = fn
        return fn

    return decorate


def handler_name(fn: Handler) -> str:
    # by name, not identity: a ready() that runs twice (or a reloaded module) registers
    # the same handler again as a new function object
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def handlers() -> dict[str, Handler]:
    return dict(_handlers)


def _check_kind(kind) -> None:
    if not isinstance(kind, str) or kind not in KINDS:
        raise EffectError(f"unknown effect kind {kind!r}; expected one of {sorted(KINDS)}")


def _check_payload(payload) -> dict:
    if not isinstance(payload, dict):
        raise EffectError(f"effect payload must be a JSON object, not {type(payload).__name__}")
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EffectError(f"effect payload is not JSON: {exc}") from exc
    return payload


def channel_key(source: str, address: str) -> str:
    """The order key of messages to one place: a source (its slug) and an address on it (a
    thread key, a chat id). Relays and notices to the same place share it, so they reach
    that place in the order they were decided."""
    if not source or not address:
        raise EffectError("a channel needs a source and an address")
    return f"{source}:{address}"[:MAX_CHANNEL]


# -- writing ---------------------------------------------------------------------------------


def enqueue(kind: str, key: str, payload: dict, *, channel: str = "", delay: float = 0,
            failed: str = "") -> Effect:
    """Store an effect in the caller's transaction; it runs after commit.

    The same (kind, key) while a row is pending replaces its payload and makes it due now
    (or after `delay`), keeping its place in line (and its channel); the replaced row gets
    a fresh count of attempts. Bad input raises `EffectError` and writes nothing.

    `failed` (an error): the work was tried once already, by its caller, and failed; the
    row starts with that attempt counted and its error, due after the kind's backoff for
    it instead of after `delay`, as if its handler had failed.

    Returns the effect with the id of its row (the existing row's when it replaced one)
    and the payload now stored; read the row again for the rest of a replaced row.
    """
    return enqueue_many(kind, [(key, payload)], channel=channel, delay=delay, failed=failed)[0]


def enqueue_many(kind: str, rows: list[tuple[str, dict]], *, channel: str = "",
                 delay: float = 0, failed: str = "") -> list[Effect]:
    """`enqueue` for several keys of one kind in one statement (a fact's subscribers)."""
    statement, effects = enqueue_many_statement(kind, rows, channel=channel, delay=delay,
                                                failed=failed)
    if statement is not None:
        fast_writes.send([statement])
    return effects


def enqueue_many_statement(kind: str, rows: list[tuple[str, dict]], *, channel: str = "",
                           delay: float = 0, failed: str = ""
                           ) -> tuple[fast_writes.Statement | None, list[Effect]]:
    """`enqueue_many`'s one statement (None for no rows), for the caller to send with its
    own writes in one round trip (fast_writes.send) in this transaction; the effects get
    their ids once it has run."""
    _check_kind(kind)
    if not isinstance(channel, str) or len(channel) > MAX_CHANNEL:
        raise EffectError(f"effect channel must be a string of at most {MAX_CHANNEL} characters")
    if channel and not KINDS[kind].ordered:
        raise EffectError(f"only ordered kinds ({', '.join(ORDERED_KINDS)}) take a channel")
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not math.isfinite(delay)
        or delay < 0
    ):
        raise EffectError("effect delay must be a number of seconds, 0 or more")
    if not isinstance(failed, str):
        raise EffectError("an effect's earlier failure is its error's text")
    attempts = 1 if failed else 0
    if failed:
        delay = backoff(KINDS[kind], attempts)
    now = timezone.now()
    effects = []
    for key, payload in rows:
        if not isinstance(key, str) or not key or len(key) > MAX_KEY:
            raise EffectError(f"effect key must be a string of 1 to {MAX_KEY} characters")
        effects.append(Effect(
            kind=str(kind), key=key, payload=_check_payload(payload), channel=channel,
            version=new_version(), attempts=attempts, due_at=now + timedelta(seconds=delay),
            created_at=now, last_error=failed[:2000],
        ))
    if not effects:
        return None, effects
    # One statement: insert, or replace the pending row of this (kind, key) in place (its
    # id, hence its place in line, and its channel stay; `line` is NULL on dead letters,
    # so they never conflict).
    statement = fast_writes.insert_statement(
        effects, unique_fields=["kind", "key", "line"],
        update_fields=["payload", "version", "due_at", "attempts",
                       *(["last_error"] if failed else [])],
    )
    _schedule_kick()  # after the commit: the statement is sent before it, or rolled back
    return statement, effects


def wake(kind: str, key: str) -> bool:
    """Make the pending row of (kind, key) due now, as if enqueued again with its payload;
    False when there is none. A handler that is running it meanwhile and answers `Later`
    finds its version replaced, so the row runs again at once: a wake-up is never lost."""
    _check_kind(kind)
    woken = Effect.objects.filter(kind=kind, key=key, state=EffectState.PENDING).update(
        version=new_version(), due_at=timezone.now())
    if woken:
        _schedule_kick()
    return bool(woken)


def retry_dead(ids: Iterable[int]) -> int:
    """Put dead letters back in line, due now, with a fresh count of attempts (admin).

    A dead letter whose (kind, key) has a pending row again (a newer payload superseded
    it), or an older dead letter of the same key, is left dead. Returns how many went back.
    """
    ids = list(ids)
    count = 0
    with transaction.atomic():
        dead = list(
            Effect.objects.select_for_update()
            .filter(pk__in=ids, state=EffectState.DEAD)
            .order_by("-id")
            .only("id", "kind", "key")
        )
        seen: set[tuple[str, str]] = set()
        now = timezone.now()
        for effect in dead:
            pair = (effect.kind, effect.key)
            if pair in seen or Effect.objects.filter(
                kind=effect.kind, key=effect.key, state=EffectState.PENDING
            ).exists():
                continue
            seen.add(pair)
            count += Effect.objects.filter(pk=effect.pk, state=EffectState.DEAD).update(
                state=EffectState.PENDING, attempts=0, due_at=now, claimed_by="", claimed_until=None
            )
        if count:
            _schedule_kick()
    return count


# -- waking a drainer ------------------------------------------------------------------------


class _Kick:
    """One commit's kick: every enqueue of a transaction registers the same instance on
    commit, and only its first call after the commit kicks."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False

    def __call__(self) -> None:
        if not self.sent:
            self.sent = True
            if getattr(_kicks, "deferred", False):
                KICK.soon()
            else:
                kick()


_kicks = threading.local()  # each thread has its own connection, hence its own transaction


def kick_from_another_thread(on: bool = True) -> None:
    """From now on this thread's commits kick from the process's kicker thread instead of
    waiting for Redis (and maybe the broker) themselves: for a thread whose every
    millisecond counts, e.g. a session host's database thread, where a turn's end waits
    for its commit. A kick still follows every commit; losing it with the process only
    delays (the beat sweep drains too)."""
    _kicks.deferred = on  # False: this thread kicks by itself again


def _schedule_kick() -> None:
    """Kick a drainer after the current transaction commits, once per transaction.

    Every enqueue registers a callback (through the public `on_commit`), so a callback lost
    with a rolled-back savepoint never takes the kick of later rows with it; they all share
    one `_Kick`, so one commit sends one kick. A `_Kick` that never ran (its transaction
    rolled back) is simply reused by the next transaction."""
    pending = getattr(_kicks, "pending", None)
    if pending is None or pending.sent:
        pending = _kicks.pending = _Kick()
    transaction.on_commit(pending)


def kick() -> None:
    """Wake a drainer now (debounced: amux_common.wakeups). Losing this only delays: the
    beat sweep drains too. The drain task clears the flag before it claims (`woke`), so it
    sees every row committed before it starts."""
    KICK.send()


def woke() -> None:
    """A drain task starts: later kicks must send a new task (see `kick`)."""
    KICK.started()


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[:120]


def backoff(policy: KindPolicy, attempts: int) -> float:
    """Seconds before the next try after `attempts` failures: doubling, capped, jittered."""
    delay = min(policy.max_backoff, policy.base_backoff * (2 ** max(0, attempts - 1)))
    return delay * random.uniform(0.5, 1.0)


def lease_seconds(policy: KindPolicy) -> float:
    return rules.lease_seconds(policy, settings.AMUX_OUTBOX_LEASE_SECONDS)


def check_lease_rule() -> None:
    """Refuse settings under which a handler could outlive its lease (effects/kinds.py);
    settings.py runs the same rule while it loads. Raises ImproperlyConfigured naming the
    settings to change."""
    error = rules.lease_rule_error(
        settings.AMUX_OUTBOX_LEASE_SECONDS, settings.AMUX_OUTBOX_TASK_TIME_LIMIT
    )
    if error:
        raise ImproperlyConfigured(error)


def _claimable(kind: str, now) -> QuerySet[Effect]:
    """Due rows of `kind` that no live lease holds, first in line first; for an ordered
    kind only the head of each channel (no earlier pending row of an ordered kind in it)."""
    rows = Effect.objects.filter(state=EffectState.PENDING, kind=kind, due_at__lte=now).filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lte=now)
    )
    if KINDS[kind].ordered:
        ahead = Effect.objects.filter(
            state=EffectState.PENDING, kind__in=ORDERED_KINDS,
            channel=OuterRef("channel"), id__lt=OuterRef("id"),
        )
        rows = rows.filter(Q(channel="") | ~Exists(ahead))
    return rows.order_by("id")


def _kinds_with_work(kinds: list[str], owner: str, now) -> list[str]:
    """The kinds that have a due row without a live lease and room under their concurrency
    (drainers other than `owner` holding live leases of the kind), read in one query after
    the turn is taken, so the counts include every claim committed before."""
    live = Q(claimed_until__gt=now)
    rows = (
        Effect.objects.filter(state=EffectState.PENDING, kind__in=kinds)
        .filter(live | Q(due_at__lte=now))
        .order_by()
        .values("kind")
        .annotate(
            held=Count("claimed_by", distinct=True, filter=live & ~Q(claimed_by=owner)),
            due=Count("id", filter=~live & Q(due_at__lte=now)),
        )
        .values_list("kind", "held", "due")
    )
    work = {kind for kind, held, due in rows if due and held < KINDS[kind].concurrency}
    return [kind for kind in kinds if kind in work]


def claim(owner: str, limit: int = 50) -> list[Effect]:
    """Lease up to `limit` due rows per kind to `owner`, honouring each kind's concurrency
    and the per-channel order of the ordered kinds. One short transaction."""
    kinds = [kind for kind in KINDS if kind in _handlers]
    if not kinds:
        return []
    now = timezone.now()
    claimed: list[Effect] = []
    with transaction.atomic():
        ClaimTurn.take()
        for kind in _kinds_with_work(kinds, owner, now):
            policy = KINDS[kind]
            size = max(1, min(policy.batch, limit))
            rows = list(_claimable(kind, now).select_for_update(skip_locked=True)[:size])
            if not rows:
                continue
            until = now + timedelta(seconds=lease_seconds(policy))
            Effect.objects.filter(pk__in=[row.pk for row in rows]).update(
                claimed_by=owner, claimed_until=until
            )
            for row in rows:
                row.claimed_by, row.claimed_until = owner, until
            claimed += rows
    claimed.sort(key=lambda effect: effect.pk)
    return claimed


def _hold(effect: Effect, owner: str) -> bool:
    """True when `owner` may run `effect` now: at least half its lease is left (renewed if
    needed). False when the lease was lost (another drainer may have the row)."""
    lease = lease_seconds(KINDS[effect.kind])
    now = timezone.now()
    if effect.claimed_until and now + timedelta(seconds=lease / 2) <= effect.claimed_until:
        return True
    until = now + timedelta(seconds=lease)
    held = Effect.objects.filter(
        pk=effect.pk, claimed_by=owner, claimed_until__gt=now, state=EffectState.PENDING
    ).update(claimed_until=until)
    if held:
        effect.claimed_until = until
    return bool(held)


def _release(effects: Iterable[Effect], owner: str) -> None:
    ids = [effect.pk for effect in effects]
    if ids:
        Effect.objects.filter(pk__in=ids, claimed_by=owner).update(
            claimed_by="", claimed_until=None
        )


def _call(effect: Effect, owner: str) -> str:
    """Run the handler; settle the row unless it is done (the caller deletes done rows)."""
    policy = KINDS[effect.kind]

    def mine() -> QuerySet[Effect]:  # built only off the happy path, which needs no query
        return Effect.objects.filter(pk=effect.pk, claimed_by=owner)

    handler = _handlers.get(effect.kind)
    if handler is None:
        # Unregistered after the claim (claim takes only kinds with a handler): not this
        # drainer's work, and no fault of the row. Give it back untouched.
        log.warning("effect %s %s: no handler here; released", effect.kind, effect.pk)
        mine().update(claimed_by="", claimed_until=None)
        return "released"
    try:
        handler(effect.pk, effect.payload)
    except Later as later:
        settled = mine().filter(version=effect.version).update(
            claimed_by="",
            claimed_until=None,
            due_at=timezone.now() + timedelta(seconds=max(0.0, later.delay)),
        )
        if not settled:
            mine().update(claimed_by="", claimed_until=None)
            return "replaced"
        return "later"
    except Exception as exc:
        attempts = effect.attempts + 1
        error = f"{type(exc).__name__}: {exc}"[:2000]
        current = mine().filter(version=effect.version)
        if attempts >= policy.max_attempts:
            settled = current.update(
                state=EffectState.DEAD, attempts=attempts, last_error=error,
                claimed_by="", claimed_until=None,
            )
            outcome = "dead"
            if settled:
                log.error("effect %s %s is a dead letter: %s", effect.kind, effect.pk, error)
        else:
            settled = current.update(
                attempts=attempts,
                last_error=error,
                claimed_by="",
                claimed_until=None,
                due_at=timezone.now() + timedelta(seconds=backoff(policy, attempts)),
            )
            outcome = "failed"
            log.warning("effect %s %s failed (attempt %s): %s",
                        effect.kind, effect.pk, attempts, error)
        if not settled:
            # Replaced while it ran: the new payload has not been tried yet.
            mine().update(claimed_by="", claimed_until=None, last_error=error)
            return "replaced"
        return outcome
    return "done"


def _settle_done(effects: list[Effect], owner: str) -> int:
    """Delete finished rows in one statement; release the ones replaced while they ran."""
    if not effects:
        return 0
    # A row replaced while it ran has a new (random, 62-bit) version: matching the batch's
    # versions as a set keeps it, short of two random versions colliding.
    deleted, _ = Effect.objects.filter(
        pk__in=[effect.pk for effect in effects],
        version__in={effect.version for effect in effects},
        claimed_by=owner,
    ).delete()
    if deleted < len(effects):
        _release(effects, owner)  # what is left was replaced (or its lease was lost)
    return deleted


def run_one(effect: Effect, owner: str) -> str:
    """Run one claimed effect's handler and settle its row at once. Returns the outcome:
    done, later, failed, dead, replaced, released (no handler here) or lost (the lease
    was no longer ours)."""
    if not _hold(effect, owner):
        return "lost"
    outcome = _call(effect, owner)
    if outcome == "done" and not _settle_done([effect], owner):
        return "replaced"
    return outcome


def drain(*, owner: str | None = None, batch: int = 50, seconds: float = 30.0) -> int:
    """Drain due effects until none is claimable or the time budget is spent.

    Returns how many effects finished (handler returned and row deleted)."""
    owner = owner or worker_id()
    deadline = time.monotonic() + seconds
    done = 0
    while time.monotonic() < deadline:
        effects = claim(owner, batch)
        if not effects:
            break
        finished: list[Effect] = []
        first_finished = 0.0
        position = 0
        try:
            for position, effect in enumerate(effects):  # noqa: B007 - used in finally
                if time.monotonic() >= deadline:
                    break
                if not _hold(effect, owner):
                    continue
                if _call(effect, owner) == "done":
                    if effect.channel:
                        # The next row of this channel waits for this delete: do it now.
                        done += _settle_done([effect], owner)
                        continue
                    if not finished:
                        first_finished = time.monotonic()
                    finished.append(effect)
                    if time.monotonic() - first_finished >= FLUSH_SECONDS:
                        done += _settle_done(finished, owner)
                        finished = []
            else:
                position = len(effects)
        finally:
            done += _settle_done(finished, owner)
            _release(effects[position:], owner)
    return done
