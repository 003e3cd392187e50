"""The session host: while a session is awake, one host owns its runtime process.

It takes the session's lease in the database (owner + expiry, renewed while it runs), kills
what a dead predecessor on this machine left behind, reconciles a turn that predecessor left
running to one terminal event, starts or resumes the native session, then serves the
session's queued inputs one turn at a time. Interrupts, permission and question answers and
input nudges arrive through Redis (``sessions.control``). When the session has been idle past
its timeout (at least 60 s) with an empty queue, no turn in flight and no pending permission
prompt, the host retires the process and the session sleeps. Losing the lease stops the host
at once: two hosts never own one session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import (
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    connections,
    transaction,
)

from effects import outbox
from runtimes import errors, get_adapter
from runtimes.base import RuntimeAdapter, tagged_pids
from sessions import (
    actions,
    capacity,
    control,
    handoff,
    hosting,
    identities,
    locks,
    native_goal_host,
    native_goals,
    services,
    timeline,
    timeline_sql,
    warm_pool,
)
from sessions.models import Lifecycle, Session, SleepReason, Turn, TurnState
from sessions.turn_service import TurnService

log = logging.getLogger(__name__)


def min_idle_seconds() -> float:
    """The floor of a session's idle timeout: 60 s (seed 000). Tests lower it."""
    return float(settings.AMUX_SESSION_MIN_IDLE_SECONDS)


def idle_after(timeout_s: float) -> float:
    """How long a host with nothing to do stays awake: the session's idle timeout, at least
    seed 000's floor; 0 for a session amux made for one task or one schedule firing, whose
    runtime nobody watches, which sleeps as soon as its turn has settled (its queue empty,
    no turn in flight, no question pending) and wakes again on new input."""
    return 0.0 if timeout_s == 0 else max(timeout_s, min_idle_seconds())


def should_sleep(*, now: float, last_active: float, idle_timeout: float, queue_empty: bool,
                 turn_in_flight: bool, pending_permission: bool, minimum: float = 60) -> bool:
    """Seed 000's auto-sleep rule: idle past max(timeout, minimum), queue empty, no turn in
    flight, no pending permission prompt."""
    return (queue_empty and not turn_in_flight and not pending_permission
            and now - last_active >= max(idle_timeout, minimum))


# ------------------------------------------------------------------ lease (sync, DB)
# the host's facts about its lease and its runtime, written by sessions/actions.py
acquire_lease = actions.lease_taken
renew_lease = actions.lease_renewed
release_lease = actions.lease_released
try_retire = actions.retired


def sleep_facts(session_id: int) -> dict[str, bool]:
    """What the sleep rule needs besides time, as the database has it now."""
    states = set(Turn.objects.filter(session_id=session_id, state__in=[
        TurnState.QUEUED, TurnState.RUNNING]).values_list("state", flat=True))
    return {"queue_empty": TurnState.QUEUED not in states,
            "turn_in_flight": TurnState.RUNNING in states,
            "pending_permission": any(p["type"] == "permission.requested" for p in
                                      timeline.pending_requests(session_id).values())}


def _nothing_to_do(session_id: int) -> bool:
    """A host task for a session that is asleep (or new) with no input waiting: a duplicate
    wake; it must not start a runtime that would only idle. A session deleted meanwhile
    has nothing to do either."""
    session = Session.objects.filter(pk=session_id).first()
    return session is None or (session.lifecycle in (Lifecycle.SLEEPING, Lifecycle.CREATED)
            and not session.turns.filter(state__in=[TurnState.QUEUED,
                                                    TurnState.RUNNING]).exists()
            and not control.waiting(session_id, "goal"))  # a goal command wakes it too


def _idle_timeout(session_id: int) -> int:
    return Session.objects.values_list("idle_timeout_s", flat=True).get(pk=session_id)


def _next_turn(session_id: int) -> Turn | None:
    return timeline_sql.next_queued_turn(session_id, TurnState.QUEUED)


def _next_input(session_id: int, session: Session
                ) -> tuple[Turn | None, services.TurnPrompt | None]:
    """The next queued turn and, if there is one, the prompt it runs with (one trip to the
    host's database thread)."""
    turn = _next_turn(session_id)
    return turn, (services.turn_prompt(session) if turn is not None else None)


def _prepare(session_id: int, owner: str) -> tuple[Session, str | None]:
    """Kill a dead predecessor's leftovers (this machine) and end its running turn; the
    work directory made if its creation's commit did not get to it."""
    session = Session.objects.select_related("provider").get(pk=session_id)
    stale = session.runtime_tag
    timeline.reconcile_running(session_id)
    actions.ensure_workdir(session)
    return session, stale


def _start_failed(session_id: int, owner: str, exc: Exception) -> None:
    code = getattr(exc, "code", "start_failed")
    actions.start_failed(session_id, owner, code, str(exc), SleepReason.RESTART_FAILED)
    timeline.fail_queued(session_id, code, "the runtime did not start")


def _record_model(session_id: int, model: str, effort: str | None, how: str,
                  request_id: str | None) -> None:
    """The session's execution snapshot takes the new model/effort (seed 000: the snapshot
    is what every later start and resume uses)."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        snap = dict(session.snapshot or {})
        previous = {"model": snap.get("model") or session.model, "effort": snap.get("effort")}
        snap.update(model=model, effort=effort)
        session.snapshot = snap
        session.model = model
        session.save(update_fields=["snapshot", "model", "updated_at"])
        timeline.note(session_id, "session.model_changed", {
            "model": model, "effort": effort, "previous": previous, "how": how,
            "request_id": request_id})


def _record_clear(session_id: int, owner: str, native: str, how: str,
                  request_id: str | None) -> None:
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        if session.lease_owner == owner:
            session.native_ref = native
            session.save(update_fields=["native_ref", "updated_at"])
        timeline.note(session_id, "session.cleared", {"how": how, "request_id": request_id})


def _store_facts(session_id: int, facts: dict[str, Any]) -> None:
    # a runtime that says nothing of goals has none (sessions.native_goals: declared, not guessed)
    Session.objects.filter(pk=session_id).update(runtime_facts={"goals": False, **facts})


# A pooled connection stays with the host this long after its last call, so the calls of
# one burst (a turn's start, a run of events, the terminal) skip the pool's checkout and
# health check; between bursts (model calls, idle) it goes back for other sessions.
HOLD_SECONDS = 0.1

def _kill_tag(tag: str) -> None:
    for pid in tagged_pids(tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class SessionHost:
    def __init__(self, session_id: int, *, owner: str | None = None,
                 poll: float | None = None):
        self.session_id = session_id
        self.host = hosting.hostname()
        self.owner = owner or f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.poll = poll if poll is not None else float(
            settings.AMUX_SESSION_CONTROL_POLL_SECONDS)
        self.lost = False
        self.adapter: RuntimeAdapter | None = None
        # the commits of a turn's end do not wait for the outbox's kick (effects.outbox)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-db",
                                            initializer=outbox.kick_from_another_thread)
        self._give_back: asyncio.TimerHandle | None = None
        self._redis: Any = None
        self.outcome = ""
        # a sleep or archive asked for while a turn ran: applied once it has ended
        self.retire = ""
        # the conversation so far, for the first turn of a new native conversation that
        # replaced a lost one (sessions/handoff.py); taken by that turn
        self.handoff: str | None = None
        # when the session was last active (the event loop's clock) and how long it may
        # then stay idle before it sleeps: set by _serve
        self.last_active = 0.0
        self.idle_timeout = 0.0

    async def db(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` on the host's one database thread (one connection, kept open; a
        broken connection is dropped and the call retried once)."""

        def call() -> Any:
            try:
                return fn(*args, **kwargs)
            except (OperationalError, InterfaceError):
                if connection.in_atomic_block:
                    raise
                close_old_connections()
                connection.close()
                return fn(*args, **kwargs)

        loop = asyncio.get_running_loop()
        if self._give_back is not None:
            self._give_back.cancel()
        try:
            return await loop.run_in_executor(self._executor, call)
        finally:
            # pooled: the connection goes back once the burst is over, so many awake
            # sessions share a few connections instead of holding one each
            self._give_back = loop.call_later(HOLD_SECONDS, self._release_connection)

    def _release_connection(self) -> None:
        self._give_back = None

        def release() -> None:
            if (connection.settings_dict.get("OPTIONS") or {}).get("pool") \
                    and not connection.in_atomic_block:
                connection.close()

        with contextlib.suppress(RuntimeError):  # the executor has shut down
            self._executor.submit(release)

    # ------------------------------------------------------------------ main
    async def run(self) -> str:
        import redis.asyncio as aioredis

        try:
            # looked at before the lease is taken: a task with nothing to do (a duplicate
            # wake, or one left in a host's queue from long ago) leaves the row untouched
            # — taking the lease would pin a session that never ran to this host
            if await self.db(_nothing_to_do, self.session_id):
                await asyncio.to_thread(capacity.wake_taken, self.session_id)
                self.outcome = "nothing_to_do"
                return self.outcome
            if not await self.db(acquire_lease, self.session_id, self.owner, self.host):
                self.outcome = "busy"
                return self.outcome
            await asyncio.to_thread(capacity.wake_taken, self.session_id)
            if await self.db(_nothing_to_do, self.session_id):
                self.outcome = "nothing_to_do"  # another host served it between the looks
                return self.outcome
            self._redis = aioredis.from_url(settings.REDIS_URL)
            renewer = asyncio.create_task(self._renew_loop())
            try:
                self.outcome = await self._serve()
            finally:
                renewer.cancel()
                with contextlib.suppress(BaseException):
                    await renewer
        finally:
            if self.adapter is not None:
                await self.adapter.close()
            if self.outcome == "archived":  # nothing of it runs again: its uid goes back
                try:
                    await self.db(identities.release, self.session_id)
                except Exception:
                    log.exception("session %s: its runtime user could not be released",
                                  self.session_id)
            if not self.lost:
                with contextlib.suppress(Exception):
                    await self.db(release_lease, self.session_id, self.owner)
            if self._redis is not None:
                with contextlib.suppress(Exception):
                    await self._redis.aclose()
            with contextlib.suppress(Exception):
                await self.db(connections.close_all)
            if self._give_back is not None:
                self._give_back.cancel()
            self._executor.shutdown(wait=False)
        return self.outcome

    async def _renew_loop(self) -> None:
        interval = max(0.5, hosting.lease_seconds() / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                ok = await self.db(renew_lease, self.session_id, self.owner)
            except Exception:
                log.warning("lease renewal failed", exc_info=True)
                continue
            if not ok:
                self.lost = True
                if self.adapter is not None:
                    await self.adapter.close()
                return

    async def _start_adapter(self, session: Session,
                             prompt: services.TurnPrompt | None = None) -> bool:
        if prompt is None:
            prompt = await self.db(services.turn_prompt, session)
        seen = await self.db(services.inline_prompt_seen, self.session_id)
        # on the database thread: an attached session's endpoint is read from its row
        cfg = await self.db(services.runtime_config, session, system_prompt=prompt.text,
                            inline_prompt_seen=seen)
        resume = session.native_ref or None
        # a new session takes a pre-started process of its launch when the pool has one
        warm = None if resume else await warm_pool.take(session, cfg, self.db)
        adapter = warm or get_adapter(session.runtime)(cfg)
        self.adapter = adapter
        try:
            try:
                native = adapter.native_session_id if warm else \
                    await adapter.start(resume=resume)
            except errors.NativeSessionNotFound as exc:
                # the saved conversation is gone: one new native conversation, told what
                # was said in the old one (amux's timeline still has it)
                self.handoff = await self.db(handoff.text, self.session_id)
                await self.db(timeline.note, self.session_id, "error", {
                    "code": exc.code, "message": str(exc)[:2000], "handoff": True,
                    "handoff_chars": len(self.handoff or "")})
                cfg = await self.db(services.runtime_config, session,
                                    system_prompt=prompt.text, inline_prompt_seen=False)
                adapter = get_adapter(session.runtime)(cfg)
                self.adapter = adapter
                native = await adapter.start()
        except (errors.RuntimeAdapterError, OSError) as exc:
            await self.db(_start_failed, self.session_id, self.owner, exc)
            return False
        await self.db(actions.runtime_started, self.session_id, self.owner, native,
                      adapter.tag)
        if adapter.mcp_skipped:
            await self.db(timeline.note, self.session_id, "error", {
                "code": "mcp_unsupported",
                "message": f"the runtime takes no HTTP MCP server; not offered: "
                           f"{', '.join(adapter.mcp_skipped)}"})
        return True

    async def _serve(self) -> str:
        """Start the runtime, then serve the session one step at a time until a step ends
        the host (it slept, was archived, or its runtime would not start) or the lease is
        lost."""
        session = await self._start()
        if session is None:
            return "start_failed"
        self._touch()
        self.idle_timeout = idle_after(session.idle_timeout_s)
        while not self.lost:
            outcome = await self._step(session)
            if outcome:
                return outcome
        return "lost_lease"

    async def _start(self) -> Session | None:
        """The session with its runtime up, once what a dead predecessor left is killed;
        None when the runtime would not start."""
        session, stale_tag = await self.db(_prepare, self.session_id, self.owner)
        if stale_tag:
            await asyncio.to_thread(_kill_tag, stale_tag)
        return session if await self._start_adapter(session) else None

    def _touch(self) -> None:
        """The session was active now: its idle time counts from here."""
        self.last_active = asyncio.get_running_loop().time()

    async def _step(self, session: Session) -> str | None:
        """One look at what the session has to do, in order of precedence: pending input,
        a waiting native goal continuation, a retirement asked for, a control command,
        the idle timeout. Returns the host's outcome when it ends."""
        await self._keep_facts()
        await native_goal_host.observe(self)
        # the prompt: assembled from the current prompt version for every turn
        turn, prompt = await self.db(_next_input, self.session_id, session)
        if turn is not None:
            return await self._serve_input(session, turn, prompt)
        if await native_goal_host.admit_waiting(self, session):
            self._touch()
            return None
        await native_goal_host.resume_preempted(self)
        if self.retire and (outcome := await self._retire_as_asked()):
            return outcome
        return await self._wait_or_sleep()

    async def _serve_input(self, session: Session, turn: Turn,
                           prompt: services.TurnPrompt) -> str | None:
        # pending user input goes first: a running goal waits (preempted)
        await native_goal_host.preempt(self)
        prompt = await self._commands_before_input(session, prompt)
        if not await self._runtime_for(prompt):
            return "start_failed"
        await self._serve_turn(turn, prompt)
        # a continuation started while ordinary input ran is refused outright
        await native_goal_host.refuse_waiting(self, "during_input", during_turn=True)
        self._touch()
        # A timeout changed while the host was awake applies from this turn on.
        self.idle_timeout = idle_after(await self.db(_idle_timeout, self.session_id))
        return None

    async def _commands_before_input(self, session: Session,
                                     prompt: services.TurnPrompt) -> services.TurnPrompt:
        """A model change or clear asked for before this input applies to it first."""
        applied = False
        while (msg := await control.pop_now(self._redis, self.session_id)) is not None:
            await self._command_while_idle(msg)
            applied = True
        if applied:  # e.g. a clear: the prompt is assembled for the new conversation
            return await self.db(services.turn_prompt, session)
        return prompt

    async def _runtime_for(self, prompt: services.TurnPrompt) -> bool:
        """A live runtime for the next turn: restarted (between turns only) when what it
        took at start has changed, started again when it is gone; False when it would not
        start."""
        reason = (self.adapter.restart_reason(prompt.text)
                  if self.adapter is not None and self.adapter.alive else None)
        if reason:
            await self.db(timeline.note, self.session_id, "session.restarted",
                          {"reason": reason})
            await self.adapter.close()
        if self.adapter is not None and self.adapter.alive:
            return True
        if self.adapter is not None:
            await self.adapter.close()  # what is left of it (a shared slot)
        fresh = await self.db(Session.objects.select_related("provider").get,
                              pk=self.session_id)
        return await self._start_adapter(fresh, prompt)

    async def _retire_as_asked(self) -> str | None:
        """A sleep or archive asked for while a turn ran, now that it has ended."""
        asked, self.retire = self.retire, ""
        if await self.db(try_retire, self.session_id, self.owner, SleepReason.MANUAL):
            return "archived" if asked == "archive" else "slept"
        self.retire = asked  # more input came first: served, then retired
        return None

    async def _wait_or_sleep(self) -> str | None:
        """Nothing to serve: wait for a control command, or sleep once idle long enough."""
        # a running goal's next turn is noticed at once
        poll = min(self.poll, 0.1) if native_goal_host.goal_active(self) else self.poll
        msg = await control.pop(self._redis, self.session_id, poll)
        if msg is not None:
            await self._command_while_idle(msg)
            return None
        if native_goal_host.goal_active(self):
            self._touch()  # the runtime works on the goal: not idle
        now = asyncio.get_running_loop().time()
        if now - self.last_active < self.idle_timeout:
            return None
        facts = await self.db(sleep_facts, self.session_id)
        if should_sleep(now=now, last_active=self.last_active,
                        idle_timeout=self.idle_timeout, minimum=0, **facts) \
                and await self.db(try_retire, self.session_id, self.owner,
                                  SleepReason.IDLE_TIMEOUT):
            return "slept"
        return None

    async def _command_while_idle(self, msg: dict[str, Any]) -> None:
        """No turn runs: each command is kept until it applies or answered with why not
        (on the timeline, where the caller looks); none is dropped unseen."""
        op = msg.get("op")
        if op in ("sleep", "archive"):
            self.retire = op
        elif op == "model":
            await self._switch_model(msg.get("model") or "", msg.get("effort"),
                                     msg.get("request_id"))
        elif op == "clear":
            await self._clear(msg.get("request_id"))
        elif op == "goal":
            await native_goal_host.apply(self, msg)
        elif op == "interrupt":
            await self.db(timeline.note, self.session_id, "control.refused", {
                "op": op, "turn": msg.get("turn"), "reason": "the turn had already ended"})
        elif op in ("permission", "answer"):
            # requests are open only while their turn runs (timeline.pending_requests)
            await self.db(timeline.note, self.session_id, "control.refused", {
                "op": op, "request_id": msg.get("request_id"),
                "reason": "the turn that asked has ended"})

    async def _keep_facts(self) -> None:
        adapter = self.adapter
        if adapter is not None and adapter.facts_changed:
            adapter.facts_changed = False
            await self.db(_store_facts, self.session_id, adapter.facts())

    async def _switch_model(self, model: str, effort: str | None,
                            request_id: str | None) -> None:
        """In place when the runtime switches an idle session itself (Codex; ACP with a
        model config option), else a handoff restart: the snapshot takes the new settings,
        the process stops, and the next turn starts it again resuming the conversation."""
        adapter = self.adapter
        if adapter is not None and adapter.alive and adapter.hot_model_switch:
            try:
                await adapter.set_model(model, effort)
            except errors.RuntimeAdapterError as exc:
                # nothing changed (the adapter restored the previous value or retired)
                await self.db(timeline.note, self.session_id, "error", {
                    "code": exc.code, "message": str(exc)[:2000], "op": "model",
                    "request_id": request_id})
                return
            await self.db(_record_model, self.session_id, model, effort, "hot", request_id)
            return
        await self.db(_record_model, self.session_id, model, effort, "restart", request_id)
        if adapter is not None and adapter.alive:
            await self.db(timeline.note, self.session_id, "session.restarted",
                          {"reason": "model_changed"})
            await adapter.close()

    async def _clear(self, request_id: str | None) -> None:
        """A new native conversation, same work directory and settings; the amux session
        stays. In place where the runtime can (new thread / session/new / new_session)."""
        adapter, native, how = self.adapter, "", "restart"
        if adapter is not None and adapter.alive:
            try:
                native, how = await adapter.clear(), "in_place"
            except errors.RuntimeAdapterError as exc:
                if exc.code != "clear_unsupported":
                    await self.db(timeline.note, self.session_id, "error", {
                        "code": exc.code, "message": str(exc)[:2000], "op": "clear",
                        "request_id": request_id})
                    return
                await adapter.close()
        await self.db(_record_clear, self.session_id, self.owner, native, how, request_id)
        # the native goal belonged to the old conversation: so did its authorization
        await self.db(native_goals.forget, self.session_id, "session_clear")

    async def _serve_turn(self, turn: Turn, prompt: services.TurnPrompt) -> None:
        """One turn from its input to its terminal (sessions/turn_service.py); the model
        and clear commands it put off run once it has ended."""
        for msg in await TurnService(self, turn, prompt).run():
            await self._command_while_idle(msg)
        if getattr(self.adapter, "lost", False):
            # the shared app-server died under it: like a lost host's, the turn ends
            # cancelled and its input is queued again; the next start resumes the thread
            await self.db(timeline.reconcile_running, self.session_id,
                          errors.AppServerLost.code,
                          "the shared Codex app-server stopped during this turn")
