"""The canonical timeline: the one writer of turns and timeline events.

It assigns turn identity and order (``Turn.seq`` per session) and event order
(``TimelineEvent.seq`` per session, gapless, under the session row lock), moves a turn's
state only as the turn's table says (sessions/core/turns.py), accepts exactly one
terminal event per turn — a later terminal is kept only as provenance on the accepted one,
and the accepted one writes the turn-ended fact to the outbox in the same transaction —
and publishes each stored event to the session's Channels group after commit. Retention's
deletion of old events (tickets/retention.py) is ``forget``. Runtime adapters
emit typed events (``runtimes.events``); provider ids are kept as provenance only.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from amux_common import fast_writes, metrics
from amux_common.clock import now as clock
from effects import events
from effects.models import EffectKind
from runtimes import events as rt
from runtimes import get_adapter
from runtimes.errors import UnknownRuntime
from sessions import hooks, locks, publisher, timeline_sql
from sessions import usage as usage_rules
from sessions.content import timeline_meta
from sessions.core import lifecycle, turns
from sessions.models import Lifecycle, Session, TimelineEvent, Turn, TurnState, UsageDay

log = logging.getLogger(__name__)

USAGE_KEYS = ("last", "cumulative", "context_window", "context_used", "cost")


def group_name(session_id: int) -> str:
    return f"session-timeline-{session_id}"


def event_data(ev: TimelineEvent, turn_seq: int | None = None) -> dict[str, Any]:
    if turn_seq is None and ev.turn_id is not None:
        turn_seq = ev.turn.seq
    return {"seq": ev.seq, "turn": turn_seq, "type": ev.type, "payload": ev.payload,
            "at": ev.at.isoformat()}


def group_message(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The channel-layer message for stored events (their JSON rendered once here)."""
    return {"type": "timeline.events", "events": items,
            "json": [json.dumps(item) for item in items]}


def publish(session_id: int, items: list[dict[str, Any]]) -> None:
    """Send stored events to the session's websocket group (after commit), without waiting
    for Redis: the process's publisher thread sends them in order."""
    if not items:
        return
    try:
        publisher.submit(settings.TIMELINE_LAYER, group_name(session_id), group_message(items))
    except Exception:  # the stored timeline is the truth; the socket catches up on replay
        log.warning("timeline publish failed for session %s", session_id, exc_info=True)


class TurnRef(NamedTuple):
    """What an event needs of its turn: the row (``pk``) and its number in the session."""

    pk: int
    seq: int


class Writer:
    """Appends events for one session inside the caller's transaction (one INSERT for a
    batch); the events are published after commit."""

    def __init__(self, session: Session, last_seq: int | None = None):
        """``last_seq``: the session's last event seq, if the caller read it under the lock."""
        self.session = session
        if last_seq is None:
            last_seq = TimelineEvent.objects.filter(session=session).aggregate(
                m=Max("seq"))["m"] or 0
        self.next_seq = last_seq + 1
        self.pending: list[tuple[TimelineEvent, int | None]] = []
        self.published: list[dict[str, Any]] = []
        self.mirrored: list[TimelineEvent] = []
        # other writes of this transaction sent with the next flush, in the same round trip
        self.also: list[fast_writes.Statement] = []

    def append(self, type_: str, payload: dict[str, Any] | None = None, *,
               turn: Turn | TurnRef | None = None, provenance: dict[str, Any] | None = None
               ) -> TimelineEvent:
        ev = TimelineEvent(session=self.session, seq=self.next_seq,
                           turn_id=turn.pk if turn else None,
                           type=type_, payload=payload or {}, provenance=provenance or {})
        self.next_seq += 1
        self.pending.append((ev, turn.seq if turn else None))
        return ev

    def flush(self, session_fields: Sequence[str] = (), *, last: bool = False) -> None:
        """Store the pending events; with ``session_fields``, the session row's changed
        fields too, in the same round trip (fast_writes.send): one write per batch.
        ``last``: nothing is written after these in the transaction, so its COMMIT goes
        with them (fast_writes.atomic)."""
        statements, self.also = self.also, []
        if session_fields:
            statements.append(fast_writes.update_statement(self.session, session_fields))
        if self.pending:
            statements.append(fast_writes.insert_statement([ev for ev, _ in self.pending]))
        if statements:
            fast_writes.send(statements, last=last)
        if not self.pending:
            return
        self.published.extend(event_data(ev, seq) for ev, seq in self.pending)
        if self.session.mirrored:
            self.mirrored.extend(ev for ev, _ in self.pending)
        self.pending.clear()

    def commit_publish(self, session_fields: Sequence[str] = (), *, last: bool = False
                       ) -> None:
        """The transaction's last writes, then its events published after commit;
        ``last``: the caller writes nothing after this (see ``flush``)."""
        # a mirrored session's events are shown elsewhere in this transaction, after them
        self.flush(session_fields, last=last and not self.session.mirrored)
        if self.mirrored:  # another place shows this session (sessions.hooks)
            events, self.mirrored = list(self.mirrored), []
            try:
                with transaction.atomic():  # its failure must not cost the timeline
                    hooks.timeline_mirrored(self.session.pk, events)
            except Exception:
                log.exception("showing session %s elsewhere failed", self.session.pk)
        items, sid = list(self.published), self.session.pk
        transaction.on_commit(lambda: publish(sid, items))


def _locked(session_id: int, turn_id: int | None = None, with_last: bool = False,
            then: Sequence[fast_writes.Statement] = ()) -> tuple[Session, list]:
    """The session row, locked: the lock serialises every writer of its timeline. With
    ``turn_id``, the turn's seq comes in the same statement (``turn_seq``): a seq never
    changes, so reading it beside the lock is safe (a turn's state is not: it is only ever
    changed by a conditional UPDATE under this lock). ``with_last``: also the session's
    last event seq read after the lock is held (``last_event_seq``, for ``Writer``), in the
    same round trip on PostgreSQL (sessions/timeline_sql.py, the one path on every
    database). ``then``: writes that need the lock held, sent in the same round trip
    (their answers come back beside the session). In a ``fast_writes.atomic`` block the
    transaction's BEGIN goes with them too."""
    return timeline_sql.locked(session_id, turn_id, with_last, then)


# ------------------------------------------------------------------------------- inputs
class TimelineError(Exception):
    code = "invalid"


class SessionArchived(TimelineError):
    code = "session_archived"


def enqueue_input(session_id: int, text: str, *, key: str | None = None,
                  images: list[dict[str, str]] | None = None,
                  parts: list[dict[str, Any]] | None = None,
                  command: str | None = None,
                  origin: dict[str, Any] | None = None,
                  queued_with: Callable[[Session], Any] | None = None) -> tuple[Turn, bool]:
    """Queue one user input as a new turn. Idempotent on ``key``. Returns (turn, created).
    ``origin``: where it came from (web, lark, api …), kept on the turn and in its
    ``turn.queued`` payload: web and Lark inputs share this one ordered ingress.
    ``queued_with``: called with the locked session when a turn is made, before its rows
    are written, in their transaction (e.g. the host's wake-up, sent after commit), which
    then ends with them (on PostgreSQL its COMMIT in their round trip) unless the caller
    holds a transaction of its own.
    Refuses (``SessionArchived``) having written nothing, once its block has ended: the
    caller's transaction goes on unharmed without a savepoint of its own."""
    with fast_writes.atomic(savepoint=False):
        # the lock, then the reads in a statement of their own (a fresh snapshot under READ
        # COMMITTED: a writer that held the lock before has committed its rows)
        session, last, last_event, existing = timeline_sql.locked_for_input(
            session_id, key or None)
        # refused outside the block, having written nothing: raised inside, it would spoil
        # the caller's transaction
        if session.lifecycle != Lifecycle.ARCHIVED:
            if existing is not None:
                return Turn.objects.get(pk=existing), False
            last = last or 0
            stored: dict[str, Any] = {"text": text, "images": images or []}
            queued: dict[str, Any] = {"text": text, "images": len(images or [])}
            if parts:  # ordered text and image parts (sessions.content), kept with the input
                stored["parts"] = parts
                queued["content"] = timeline_meta(parts)  # images as metadata, never bytes
                queued["images"] = sum(1 for p in parts if p.get("type") == "image")
            if command:
                stored["command"] = queued["command"] = command
            if origin:
                queued["origin"] = origin
            turn = Turn(session=session, seq=last + 1, key=key or f"turn-{last + 1}",
                        input=stored, origin=origin or {})
            if queued_with is not None:
                queued_with(session)
            writer = Writer(session, last_event or 0)
            # the turn and its event in one round trip: the event names its turn by the turn's
            # unique (session, seq), a subquery the INSERT resolves after the turn's own
            writer.also.append(fast_writes.insert_statement([turn]))
            event = writer.append("turn.queued", queued,
                                  turn=TurnRef(_TurnAt(session_id, turn.seq), turn.seq))  # type: ignore[arg-type]
            writer.flush(last=not session.mirrored)
            event.turn_id = turn.pk
            writer.commit_publish()
            return turn, True
    raise SessionArchived("the session is archived and takes no more input")


class _TurnAt:
    """The id of the session's turn numbered ``seq``, as a value of an INSERT (an
    expression fast_writes compiles); its SQL made once from the model, not by a queryset
    each time (that cost more than the round trip it saves)."""

    def __init__(self, session_id: int, seq: int) -> None:
        self.params = [session_id, seq]

    def resolve_expression(self, *args: Any, **kwargs: Any) -> _TurnAt:
        return self

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list]:
        return _turn_at_sql(), self.params


@functools.cache
def _turn_at_sql() -> str:
    q = connection.ops.quote_name
    meta = Turn._meta
    return (f"(SELECT {q(meta.pk.column)} FROM {q(meta.db_table)} WHERE "
            f"{q(meta.get_field('session').column)} = %s AND "
            f"{q(meta.get_field('seq').column)} = %s)")


# ------------------------------------------------------------------------------- runtime
def record(session_id: int, turn_id: int | None,
           runtime_events: Iterable[rt.Event]) -> list[dict[str, Any]]:
    """Store a batch of runtime events of one turn, in order, in one transaction.

    Returns the stored events as published data; they are published after commit."""
    runtime_events = [e for e in runtime_events if not _nothing_to_store(e, turn_id)]
    if not runtime_events:
        return []  # e.g. a bare turn.started: start_turn already stored it
    terminal = next((e for e in runtime_events if e.terminal), None) if turn_id else None
    ending = None
    if terminal is not None:
        # the turn ends with the batch's first terminal, only if it has not ended yet
        # (turns.TABLE, applied under the session lock, in the lock's round trip); a later
        # one is late
        end = turns.change(terminal.type)
        ending = Turn(pk=turn_id, state=end.state, ended_at=timezone.now(),
                      error_code=terminal.payload().get("code", "")
                      if end.state == turns.FAILED else "")
    # progress events: no fsync wait; terminals stay durable
    with fast_writes.atomic(relaxed=not any(e.terminal for e in runtime_events)):
        # its start time comes back with the write: no read after it for the metrics
        session, answers = _locked(session_id, turn_id, with_last=True, then=[
            fast_writes.update_statement(ending, ["state", "ended_at", "error_code"],
                                         only_if=("state", end.sources),
                                         returning=("started_at",))
        ] if ending is not None else [])  # the lock serialises every writer
        ended = answers[0] if ending is not None else None
        turn = TurnRef(turn_id, session.turn_seq) if turn_id else None
        writer = Writer(session, session.last_event_seq)
        usage_changed = False
        for event in runtime_events:
            payload = event.payload()
            if event.type == rt.TurnStarted.type:
                # start_turn already opened the turn; the native id is provenance only
                if turn is not None:  # sent with the batch's events
                    writer.also.append(timeline_sql.provenance_statement(
                        turn.pk, "turn.started",
                        {"native_turn_id": payload["native_turn_id"]}))
                continue
            if event.terminal:
                if turn is None:
                    continue
                if event is not terminal or ended is None:
                    # the turn had ended already, or a terminal earlier in this batch
                    # is the accepted one
                    writer.flush()
                    _late_terminal(turn.pk, event.type, payload)
                    continue
                state, ended_at, error_code = ending.state, ending.ended_at, ending.error_code
                fact = _announce_turn_end(session_id, turn.pk, state, error_code, ended_at,
                                          session.turn_key, session.has_task_runs)
                if fact is not None:  # sent with the batch's events, in their round trip
                    writer.also.append(fact)
                started_at = ended[0]
                transaction.on_commit(functools.partial(
                    metrics.turn_ended, session.runtime, str(state),
                    (ended_at - started_at).total_seconds() if started_at else None))
                lifecycle.apply(session, lifecycle.TURN_ENDED)
                session.last_active_at = timezone.now()
            if event.type == rt.UsageObserved.type:
                _count_usage(session, payload)
                usage = dict(session.usage or {})
                for k in USAGE_KEYS:  # the latest report replaces; never summed
                    if payload.get(k) is not None:
                        usage[k] = payload[k]
                session.usage = usage
                usage_changed = True
            writer.append(event.type, payload, turn=turn)
        fields = ["usage"] if usage_changed else []
        if session.lifecycle == Lifecycle.IDLE:
            fields += ["lifecycle", "last_active_at"]
        # the session row's change goes with the batch's events (one round trip)
        writer.commit_publish([*fields, "updated_at"] if fields else (), last=True)
        return writer.published


def _nothing_to_store(event: rt.Event, turn_id: int | None) -> bool:
    """A turn.started without a native id (start_turn stored the event) or a terminal
    without a turn: record writes nothing for it, so it needs no transaction."""
    if event.type == rt.TurnStarted.type:
        return turn_id is None or not event.payload().get("native_turn_id")
    return event.terminal and turn_id is None


def _count_usage(session: Session, payload: dict[str, Any]) -> None:
    """Add what a usage report spent to the session's record of today (UTC), in the same
    transaction as the report, before the session's latest usage is replaced by it.

    Not for a session whose model requests go through amux's model gateway: the gateway
    counts each request's tokens from the provider's own answer (model_credentials.
    usage_counted), and the runtime's report of the same requests would count them twice.
    The report still replaces the session's latest ``usage`` (context window, display)."""
    if session.usage_metered:
        return
    added = usage_rules.increase(session.usage, payload, _native_cumulative(session.runtime))
    if added <= 0:
        return
    day = clock().astimezone(UTC).date()
    updated = UsageDay.objects.filter(session=session, day=day).update(tokens=F("tokens") + added)
    if not updated:
        UsageDay.objects.create(session=session, day=day, tokens=added)


def turn_tokens(turn: Turn) -> int:
    """Tokens one turn used: what its ``usage.observed`` reports added, each counted the
    way the session's daily usage counts it (``_count_usage``)."""
    cumulative = _native_cumulative(turn.session.runtime)
    events = TimelineEvent.objects.filter(session_id=turn.session_id, type="usage.observed")
    first = turn.events.order_by("seq").values_list("seq", flat=True).first() or 0
    before = events.filter(seq__lt=first).order_by("-seq").values_list(
        "payload", flat=True).first()
    spent, previous = 0, before
    for payload in events.filter(turn_id=turn.pk).order_by("seq").values_list(
            "payload", flat=True):
        spent += usage_rules.increase(previous, payload, cumulative)
        previous = payload
    return spent


def _native_cumulative(runtime: str) -> bool:
    try:
        return get_adapter(runtime).static_capabilities().native_cumulative_usage
    except UnknownRuntime:
        return False


def _announce_turn_end(session_id: int, turn_id: int, state: str, error_code: str,
                       ended_at: datetime, turn_key: str, has_task_runs: bool
                       ) -> fast_writes.Statement | None:
    """The turn-ended fact, for the terminal event's own transaction, so it outlives a
    crash right after the commit (the caller sends it with the batch's writes). Sessions
    knows no consumer: tickets, goals and task runs subscribe to it (effects.events), each
    with its own durable row."""
    return events.publish_statement(EffectKind.TURN_ENDED, f"turn:{turn_id}", {
        "session": session_id, "turn": turn_id, "turn_key": turn_key, "state": str(state),
        "error_code": error_code, "ended_at": ended_at.isoformat(),
        "task_runs": bool(has_task_runs)})


def _late_terminal(turn_id: int, type_: str, payload: dict[str, Any]) -> None:
    accepted = TimelineEvent.objects.filter(turn_id=turn_id,
                                            type__in=list(turns.TERMINALS)).first()
    if accepted is None:
        return
    prov = dict(accepted.provenance or {})
    prov.setdefault("late", []).append({"type": type_, "payload": payload,
                                        "at": timezone.now().isoformat()})
    accepted.provenance = prov
    accepted.save(update_fields=["provenance"])


def start_turn(session_id: int, turn_id: int, native_turn_id: str | None = None,
               prompt: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Open a queued turn. ``prompt``: how its system prompt was made and delivered
    (``prompt_revisions``, the prompt versions it was assembled from, and the channel),
    kept in the ``turn.started`` payload and on the turn."""
    payload: dict[str, Any] = {"native_turn_id": native_turn_id} if native_turn_id else {}
    payload.update(prompt or {})
    # only a queued turn opens (turns.TABLE, under the session lock, so its state is
    # current: in the lock's round trip); when it was queued comes back with the write
    # (the metrics' wait)
    start = turns.change(turns.START)
    opening = Turn(pk=turn_id, state=start.state, started_at=timezone.now(),
                   prompt_revisions=list(payload.get("prompt_revisions") or []))
    with fast_writes.atomic():
        session, (opened,) = _locked(session_id, turn_id, with_last=True, then=[
            fast_writes.update_statement(opening, ["state", "started_at", "prompt_revisions"],
                                         only_if=("state", start.sources),
                                         returning=("created_at",))])
        if opened is None:
            return []
        turn = TurnRef(turn_id, session.turn_seq)
        if session.has_task_runs:  # its task run (execution/task_runs.py) is running now
            hooks.task_turn_started(session_id, turns.base_key(session.turn_key))
        lifecycle.apply(session, lifecycle.TURN_STARTED)
        writer = Writer(session, session.last_event_seq)
        writer.append("turn.started", payload, turn=turn)
        # the session's new state and the event: one round trip, with the COMMIT
        writer.commit_publish(["lifecycle", "sleep_reason", "updated_at"], last=True)
        transaction.on_commit(functools.partial(
            metrics.turn_started, session.runtime,
            (opening.started_at - opened[0]).total_seconds()))
        return writer.published


def reconcile_running(session_id: int, code: str = "host_lost",
                      message: str = "the runtime host stopped during this turn") -> int:
    """Give every turn left running by a lost host its one terminal event, and queue its
    continuation if it has one (turns.host_lost). Each turn in a durable transaction of
    its own: the host calls this on its database thread (before it serves, and after a
    shared app-server was lost), never inside a transaction."""
    ended = 0
    archived = Session.objects.filter(pk=session_id, lifecycle=Lifecycle.ARCHIVED).exists()
    for turn in Turn.objects.filter(session_id=session_id, state=TurnState.RUNNING):
        stored = turn.input or {}
        lost = turns.host_lost(turn.key, stored, archived=archived, code=code,
                               message=message)
        with transaction.atomic(durable=True):
            record(session_id, turn.pk, [lost.terminal])
            if (again := lost.continuation) is not None:  # idempotent on its key
                enqueue_input(session_id, again.text, key=again.key,
                              images=stored.get("images") or None, parts=again.parts,
                              command=stored.get("command"), origin=turn.origin or None)
        ended += 1
    return ended


def fail_queued(session_id: int, code: str, message: str) -> None:
    """The runtime did not start: the queued inputs cannot run, each ends failed with its
    one terminal event."""
    for turn in Turn.objects.filter(session_id=session_id, state=TurnState.QUEUED):
        record(session_id, turn.pk, [rt.TurnFailed(code=code, message=message)])


def note(session_id: int, type_: str, payload: dict[str, Any]) -> None:
    """A session-level event (no turn), e.g. an error at start-up or a lifecycle change."""
    with fast_writes.atomic():
        session, _ = _locked(session_id, with_last=True)
        writer = Writer(session, session.last_event_seq)
        writer.append(type_, payload)
        writer.commit_publish(last=True)


# ------------------------------------------------------------------------------- reads
def events_after(session_id: int, after: int = 0, limit: int | None = None
                 ) -> list[dict[str, Any]]:
    qs = (TimelineEvent.objects.filter(session_id=session_id, seq__gt=after)
          .select_related("turn").order_by("seq"))
    if limit:
        qs = qs[:limit]
    return [event_data(ev) for ev in qs]


def last_seq(session_id: int) -> int:
    return TimelineEvent.objects.filter(session_id=session_id).aggregate(
        m=Max("seq"))["m"] or 0


ASYNC = "async"


def pending_requests(session_id: int) -> dict[str, dict[str, Any]]:
    """Permission requests and questions of running turns that have no answer yet, and the
    open async questions (``open_async_questions``)."""
    open_events = TimelineEvent.objects.filter(
        session_id=session_id, turn__state=TurnState.RUNNING,
        type__in=["permission.requested", "question.asked", "permission.answered",
                  "question.answered"]).order_by("seq")
    pending: dict[str, dict[str, Any]] = {}
    for ev in open_events:
        rid = ev.payload.get("request_id")
        if ev.type == "question.asked" and ev.payload.get("delivery") == ASYNC:
            continue  # open or not whatever its turn does: see below
        if ev.type in ("permission.requested", "question.asked"):
            pending[rid] = {"type": ev.type, "payload": ev.payload, "seq": ev.seq}
        else:
            pending.pop(rid, None)
    pending.update(open_async_questions(session_id))
    return pending


def open_async_questions(session_id: int) -> dict[str, dict[str, Any]]:
    """Async questions (no native request waits; the answer is an ordinary input) stay
    open after their turn, until answered or cancelled, or until the native conversation
    they belong to is gone: a clear, an archive, or a handoff to a new conversation."""
    asked = list(TimelineEvent.objects.filter(
        session_id=session_id, type="question.asked", payload__delivery=ASYNC)
        .order_by("seq").values_list("seq", "payload"))
    if not asked:
        return {}
    first = asked[0][0]
    closed_before = max([0, *TimelineEvent.objects.filter(
        Q(type__in=["session.cleared", "session.archived"]) | Q(type="error",
                                                             payload__handoff=True),
        session_id=session_id, seq__gt=first).values_list("seq", flat=True)])
    answered = set(TimelineEvent.objects.filter(
        session_id=session_id, type="question.answered", seq__gt=first,
        payload__request_id__in=[p.get("request_id") for _, p in asked])
        .values_list("payload__request_id", flat=True))
    return {p["request_id"]: {"type": "question.asked", "payload": p, "seq": seq}
            for seq, p in asked
            if seq > closed_before and p.get("request_id") not in answered}


def note_interrupt_requested(turn_id: int) -> None:
    """Keep on a running turn that an interrupt was asked for (turns.host_lost reads it)."""
    with transaction.atomic():
        turn = locks.turn(turn_id)  # its row alone (sessions/locks.py)
        noted = None if turn is None else turns.interrupt_noted(turn.state, turn.input or {})
        if noted is not None:
            turn.input = noted
            turn.save(update_fields=["input"])


def turn_in_flight(session_id: int) -> Turn | None:
    return Turn.objects.filter(session_id=session_id, state=TurnState.RUNNING).first()


# ------------------------------------------------------------------ retention
def forget(sessions: Any, limit: int) -> int:
    """Retention (tickets/retention.py): at most ``limit`` events of ``sessions`` (a
    queryset of session ids whose history has expired) deleted, oldest first, in a short
    transaction of its own (SQLite has one writer); how many went."""
    with transaction.atomic():
        ids = list(TimelineEvent.objects.filter(session__in=sessions)
                   .values_list("pk", flat=True)[:limit])
        return TimelineEvent.objects.filter(pk__in=ids).delete()[0] if ids else 0
