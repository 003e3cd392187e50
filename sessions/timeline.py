"""The canonical timeline: the one writer of turns and timeline events.

It assigns turn identity and order (``Turn.seq`` per session) and event order
(``TimelineEvent.seq`` per session, gapless, under the session row lock), accepts exactly one
terminal event per turn — a later terminal is kept only as provenance on the accepted one,
and the accepted one writes the turn-ended fact to the outbox in the same transaction —
and publishes each stored event to the session's Channels group after commit. Runtime adapters
emit typed events (``runtimes.events``); provider ids are kept as provenance only.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Sequence
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
from sessions.core import lifecycle
from sessions.models import (
    Lifecycle,
    Session,
    TaskRun,
    TaskRunState,
    TimelineEvent,
    Turn,
    TurnState,
    UsageDay,
)

log = logging.getLogger(__name__)

TERMINAL_STATE = {
    rt.TurnCompleted.type: TurnState.COMPLETED,
    rt.TurnFailed.type: TurnState.FAILED,
    rt.TurnCancelled.type: TurnState.CANCELLED,
}
ENDED = {TurnState.COMPLETED, TurnState.FAILED, TurnState.CANCELLED}
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

    def flush(self, session_fields: Sequence[str] = ()) -> None:
        """Store the pending events; with ``session_fields``, the session row's changed
        fields too, in the same round trip (fast_writes.send): one write per batch."""
        statements, self.also = self.also, []
        if session_fields:
            statements.append(fast_writes.update_statement(self.session, session_fields))
        if self.pending:
            statements.append(fast_writes.insert_statement([ev for ev, _ in self.pending]))
        if statements:
            fast_writes.send(statements)
        if not self.pending:
            return
        self.published.extend(event_data(ev, seq) for ev, seq in self.pending)
        if self.session.mirrored:
            self.mirrored.extend(ev for ev, _ in self.pending)
        self.pending.clear()

    def commit_publish(self, session_fields: Sequence[str] = ()) -> None:
        self.flush(session_fields)
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
            relaxed: bool = False) -> Session:
    """The session row, locked: the lock serialises every writer of its timeline. With
    ``turn_id``, the turn's seq comes in the same statement (``turn_seq``): a seq never
    changes, so reading it beside the lock is safe (a turn's state is not: it is only ever
    changed by a conditional UPDATE under this lock). ``with_last``: also the session's
    last event seq read after the lock is held (``last_event_seq``, for ``Writer``), in the
    same round trip on PostgreSQL (sessions/timeline_sql.py, the one path on every
    database). ``relaxed``: this transaction commits without waiting for the WAL flush
    (on PostgreSQL set in the lock's own round trip)."""
    return timeline_sql.locked(session_id, turn_id, with_last, relaxed)


# ------------------------------------------------------------------------------- inputs
class TimelineError(Exception):
    code = "invalid"


class SessionArchived(TimelineError):
    code = "session_archived"


def enqueue_input(session_id: int, text: str, *, key: str | None = None,
                  images: list[dict[str, str]] | None = None,
                  parts: list[dict[str, Any]] | None = None,
                  command: str | None = None,
                  origin: dict[str, Any] | None = None) -> tuple[Turn, bool]:
    """Queue one user input as a new turn. Idempotent on ``key``. Returns (turn, created).
    ``origin``: where it came from (web, lark, api …), kept on the turn and in its
    ``turn.queued`` payload: web and Lark inputs share this one ordered ingress.
    Raises before writing anything, so the caller's transaction needs no savepoint."""
    with transaction.atomic(savepoint=False):
        # the lock, then the reads in a statement of their own (a fresh snapshot under READ
        # COMMITTED: a writer that held the lock before has committed its rows)
        session, last, last_event, existing = timeline_sql.locked_for_input(
            session_id, key or None)
        if session.lifecycle == Lifecycle.ARCHIVED:
            raise SessionArchived("the session is archived and takes no more input")
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
        writer = Writer(session, last_event or 0)
        # the turn and its event in one round trip: the event names its turn by the turn's
        # unique (session, seq), a subquery the INSERT resolves after the turn's own
        writer.also.append(fast_writes.insert_statement([turn]))
        event = writer.append("turn.queued", queued,
                              turn=TurnRef(_TurnAt(session_id, turn.seq), turn.seq))  # type: ignore[arg-type]
        writer.flush()
        event.turn_id = turn.pk
        writer.commit_publish()
        return turn, True


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
    with transaction.atomic():
        # progress events: no fsync wait; terminals stay durable
        relaxed = not any(e.terminal for e in runtime_events)
        session = _locked(session_id, turn_id, with_last=True,  # serialises every writer
                          relaxed=relaxed)
        turn = TurnRef(turn_id, session.turn_seq) if turn_id else None
        writer = Writer(session, session.last_event_seq)
        usage_changed = False
        for event in runtime_events:
            payload = event.payload()
            if event.type == rt.TurnStarted.type:
                # start_turn already opened the turn; the native id is provenance only
                if turn is not None:
                    TimelineEvent.objects.filter(turn_id=turn.pk, type="turn.started").update(
                        provenance={"native_turn_id": payload["native_turn_id"]})
                continue
            if event.terminal:
                if turn is None:
                    continue
                state = TERMINAL_STATE[event.type]
                ended_at = timezone.now()
                error_code = payload.get("code", "") if state == TurnState.FAILED else ""
                # only a turn not yet ended takes it (under the session lock)
                ending = Turn(pk=turn.pk, state=state, ended_at=ended_at, error_code=error_code)
                # its start time comes back with the write: no read after it for the metrics
                ended = fast_writes.update(ending, ["state", "ended_at", "error_code"],
                                           unless=("state", ENDED), returning=("started_at",))
                if ended is None:
                    writer.flush()  # a terminal earlier in this batch is the accepted one
                    _late_terminal(turn.pk, event.type, payload)
                    continue
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
        writer.commit_publish([*fields, "updated_at"] if fields else ())
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
                                            type__in=list(TERMINAL_STATE)).first()
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
    with transaction.atomic():
        session = _locked(session_id, turn_id, with_last=True)
        # only a queued turn opens (under the session lock, so its state is current)
        opening = Turn(pk=turn_id, state=TurnState.RUNNING, started_at=timezone.now(),
                       prompt_revisions=list(payload.get("prompt_revisions") or []))
        # when it was queued comes back with the write (the metrics' wait): no read after it
        opened = fast_writes.update(opening, ["state", "started_at", "prompt_revisions"],
                                    only_if=("state", [TurnState.QUEUED]),
                                    returning=("created_at",))
        if opened is None:
            return []
        turn = TurnRef(turn_id, session.turn_seq)
        if session.has_task_runs:  # its task run (sessions/task_runs.py) is running now
            TaskRun.objects.filter(session_id=session_id, turn_key=base_key(session.turn_key),
                                   state=TaskRunState.QUEUED).update(
                state=TaskRunState.RUNNING, started_at=timezone.now())
        lifecycle.apply(session, lifecycle.TURN_STARTED)
        writer = Writer(session, session.last_event_seq)
        writer.append("turn.started", payload, turn=turn)
        # the session's new state and the event: one round trip
        writer.commit_publish(["lifecycle", "sleep_reason", "updated_at"])
        transaction.on_commit(functools.partial(
            metrics.turn_started, session.runtime,
            (opening.started_at - opened[0]).total_seconds()))
        return writer.published


RESUME_SUFFIX = ":resumed"
RESUME_LIMIT = 2  # continuations of one input; a turn that keeps killing its host fails
RESUME_TEXT = ("(amux) The process running this conversation stopped while you were working "
               "on the message below, so that turn was cut short. Continue it where it "
               "stopped: what you already did has taken effect, so do not repeat it.\n\n")


def base_key(key: str) -> str:
    """The key of the input a turn carries on: a continuation's key without its suffixes."""
    return key.split(RESUME_SUFFIX, 1)[0]


def reconcile_running(session_id: int, code: str = "host_lost",
                      message: str = "the runtime host stopped during this turn") -> int:
    """Give every turn left running by a dead host its one terminal event.

    A host's death is amux's fault, not the agent's: the turn ends cancelled and the same
    input is queued again as a continuation (idempotent on its key, bounded), so the work
    a person asked for is not dropped. Past the bound the turn ends failed, as before."""
    ended = 0
    archived = Session.objects.filter(pk=session_id, lifecycle=Lifecycle.ARCHIVED).exists()
    for turn in Turn.objects.filter(session_id=session_id, state=TurnState.RUNNING):
        with transaction.atomic():
            if (turn.input or {}).get("interrupt_requested"):
                # someone interrupted it before the host died: it is not continued
                record(session_id, turn.pk, [rt.TurnCancelled(reason=code)])
            elif (turn.input or {}).get("command") == "goal":
                # a goal turn is the runtime's own: the next host admits the goal's next
                # continuation afresh (sessions.native_goal_host), none is replayed
                record(session_id, turn.pk, [rt.TurnCancelled(reason=code)])
            elif not archived and turn.key.count(RESUME_SUFFIX) < RESUME_LIMIT:
                record(session_id, turn.pk, [rt.TurnCancelled(reason=code)])
                text = (turn.input or {}).get("text", "")
                if not text.startswith(RESUME_TEXT):
                    text = RESUME_TEXT + text
                parts = list((turn.input or {}).get("parts") or [])
                if parts and not parts[0].get("text", "").startswith(RESUME_TEXT):
                    parts.insert(0, {"type": "text", "text": RESUME_TEXT.rstrip()})
                enqueue_input(session_id, text, key=turn.key + RESUME_SUFFIX,
                              images=(turn.input or {}).get("images") or None,
                              parts=parts or None,
                              command=(turn.input or {}).get("command"),
                              origin=turn.origin or None)
            else:
                record(session_id, turn.pk, [rt.TurnFailed(code=code, message=message)])
        ended += 1
    return ended


def note(session_id: int, type_: str, payload: dict[str, Any]) -> None:
    """A session-level event (no turn), e.g. an error at start-up or a lifecycle change."""
    with transaction.atomic():
        session = _locked(session_id, with_last=True)
        writer = Writer(session, session.last_event_seq)
        writer.append(type_, payload)
        writer.commit_publish()


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
    """Keep on a running turn that an interrupt was asked for (reconcile_running reads it)."""
    with transaction.atomic():
        turn = locks.turn(turn_id)  # its row alone (sessions/locks.py)
        if turn is not None and not (turn.input or {}).get("interrupt_requested"):
            turn.input = {**(turn.input or {}), "interrupt_requested": True}
            turn.save(update_fields=["input"])


def turn_in_flight(session_id: int) -> Turn | None:
    return Turn.objects.filter(session_id=session_id, state=TurnState.RUNNING).first()
