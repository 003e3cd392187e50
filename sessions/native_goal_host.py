"""The session host's part of native goals: the one runtime owner carries out goal
commands natively and admits (or refuses) the turns the runtime starts by itself.

The host calls these between turns and, for commands, interrupts and input nudges, while
a turn runs. Every native call goes through the adapter's ``goal_*`` methods (Codex
``thread/goal/*``, always with ``origin: "user"``: a person asked); what the runtime
answers is recorded with ``native_goals.record``. A continuation is admitted only when
``native_goals.admissible`` says so, then runs as a canonical turn of its own (``TurnInput.command
== "goal"``) with the normal terminal event and watchdogs; otherwise it is interrupted and
recorded as ``goal.continuation_refused``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from runtimes import errors
from sessions import native_goal_commands, native_goals, services

if TYPE_CHECKING:
    from sessions.host import SessionHost

log = logging.getLogger(__name__)
ORIGIN = {"origin": "user"}
REFUSED_TURN_WAIT = 10.0  # seconds for a refused turn's interrupted end


def _goal_adapter(host: SessionHost) -> Any:
    adapter = host.adapter
    if adapter is None or not adapter.alive or not getattr(adapter, "goals_supported", False):
        return None
    return adapter


def goal_active(host: SessionHost) -> bool:
    adapter = _goal_adapter(host)
    return bool(adapter and adapter.goal and adapter.goal.get("status") == "active")


async def observe(host: SessionHost) -> None:
    """Record the goal reports the runtime sent since the last look."""
    adapter = _goal_adapter(host)
    if adapter is None or not adapter.goal_updates:
        return
    updates, adapter.goal_updates = adapter.goal_updates, []
    for native in updates:
        if native is None:
            await host.db(native_goals.record, host.session_id, None, cleared=True)
        else:
            await host.db(native_goals.record, host.session_id, native)


def deferred(session_id: int, msg: dict[str, Any], has_goals: bool) -> None:
    """The host's answer to a deferred `goal <text>` (sessions.native_goals.defer), once its
    runtime has started: the goal is created (or refused) as if typed now; without goals,
    the text is the session's next ordinary input (once: keyed by the request)."""
    text, origin = str(msg.get("text") or ""), msg.get("origin") or {}
    command = native_goal_commands.parse(text)
    if has_goals and command is not None:
        try:
            native_goals.run(session_id, command, origin)
        except native_goals.GoalRefused as exc:
            native_goals.refuse(session_id, command.verb, str(exc))
        return
    services.post_message(session_id, text, key=f"goal-deferred:{msg.get('request_id')}",
                          origin={**origin, "goal_deferred": True})


async def apply(host: SessionHost, msg: dict[str, Any], *, goal_turn: bool = False) -> None:
    """Carry out one goal command (``op: goal``) natively. ``goal_turn``: a goal turn runs
    now (pause and clear stop it, after the authorization is gone)."""
    verb = msg.get("verb")
    adapter = _goal_adapter(host)
    if verb == "deferred":  # a new session's first `goal <text>`: the runtime has started
        await host.db(deferred, host.session_id, msg, adapter is not None)
        return
    if adapter is None:
        await host.db(native_goals.record, host.session_id, None, command=verb,
                      refused="the runtime is not running with native goals")
        return
    await observe(host)
    try:
        native, cleared = await _native_command(adapter, msg)
    except errors.RuntimeAdapterError as exc:
        if verb in ("create", "set", "resume"):
            await host.db(native_goals.set_flags, host.session_id, authorized=False)
        await host.db(native_goals.record, host.session_id, adapter.goal, command=verb,
                      refused=f"the runtime refused: {exc}")
        return
    # reports read before the answer are older than it: the answer is the state now
    adapter.goal_updates = []
    if verb in ("pause", "clear") and goal_turn:
        with contextlib.suppress(errors.RuntimeAdapterError):
            await adapter.interrupt()  # the authorization is revoked already: then cancel
    if cleared:
        adapter.goal_updates = []
        await host.db(native_goals.record, host.session_id, None, command=verb, cleared=True,
                      goal_key=msg.get("previous_key"))
        return
    await host.db(native_goals.record, host.session_id, native, command=verb,
                  native_thread=adapter.native_session_id)


async def _native_command(adapter: Any, msg: dict[str, Any]
                          ) -> tuple[dict[str, Any] | None, bool]:
    verb = msg.get("verb")
    if verb == "create":
        if adapter.goal is not None:  # a finished (or unknown) goal: a new one starts fresh
            await adapter.goal_clear()
        return await adapter.goal_set(objective=msg.get("text") or "", **ORIGIN), False
    if verb == "set":
        if adapter.goal is None:
            return await adapter.goal_set(objective=msg.get("text") or "", **ORIGIN), False
        # the provider's metering: a new objective keeps the goal's native usage
        return await adapter.goal_set(objective=msg.get("text") or "", status="active",
                                      **ORIGIN), False
    if verb == "pause":
        return await adapter.goal_set(status="paused", **ORIGIN), False
    if verb == "resume":
        return await adapter.goal_set(status="active", **ORIGIN), False
    if verb == "budget":
        return await adapter.goal_set(tokenBudget=int(msg["budget"]), **ORIGIN), False
    if verb == "clear":
        if adapter.goal is not None:
            await adapter.goal_clear()
        return None, True
    raise errors.RuntimeAdapterError(f"unknown goal command {verb!r}", code="invalid")


async def preempt(host: SessionHost, *, running_goal_turn: bool = False) -> None:
    """Ordinary input goes first: an authorized running goal is paused natively (keeping
    its authorization, marked preempted) and a running goal turn is cancelled."""
    adapter = _goal_adapter(host)
    if adapter is None:
        return
    if running_goal_turn and not await host.db(native_goals.input_waiting, host.session_id):
        return  # a late nudge of input already served: the goal turn goes on
    # no native goal runs: nothing to pause (and no database trip before every input)
    row = await host.db(native_goals.current, host.session_id) if goal_active(host) else None
    if row is not None and row.authorized:
        await host.db(native_goals.set_flags, host.session_id, preempted=True)
        try:
            native = await adapter.goal_set(status="paused", **ORIGIN)
        except errors.RuntimeAdapterError:
            log.warning("pausing the goal for input failed", exc_info=True)
        else:
            adapter.goal_updates = []
            await host.db(native_goals.record, host.session_id, native, command=None)
    if running_goal_turn:
        with contextlib.suppress(errors.RuntimeAdapterError):
            await adapter.interrupt()
    # a continuation the runtime started meanwhile is not admitted: the input goes first
    await refuse_waiting(host, "input_first")


async def revoke(host: SessionHost) -> None:
    """An explicit interrupt revokes the goal's authorization, then pauses it natively."""
    row = await host.db(native_goals.current, host.session_id)
    if row is None or not (row.authorized or row.preempted):
        return
    await host.db(native_goals.set_flags, host.session_id, authorized=False, preempted=False)
    adapter = _goal_adapter(host)
    if adapter is not None and adapter.goal and adapter.goal.get("status") == "active":
        with contextlib.suppress(errors.RuntimeAdapterError):
            native = await adapter.goal_set(status="paused", **ORIGIN)
            adapter.goal_updates = []
            await host.db(native_goals.record, host.session_id, native, command="interrupt")


async def refuse_waiting(host: SessionHost, reason: str, *, during_turn: bool = False
                         ) -> None:
    """Refuse every continuation that waits for admission (``during_turn``: each that
    started while one of our turns ran)."""
    adapter = _goal_adapter(host)
    refused = False
    while adapter is not None and (
            waiting := adapter.waiting_native_turn(during_turn=during_turn)) is not None:
        await _refuse(host, adapter, waiting[0], reason)
        refused = True
    if refused and goal_active(host):
        row = await host.db(native_goals.current, host.session_id)
        if row is None or not row.authorized:
            # refused for coming at the wrong time, but nobody authorized it either: it
            # stops here, as it would have on its next try
            await _pause(host, adapter)


async def _refuse(host: SessionHost, adapter: Any, turn_id: str, reason: str) -> None:
    await adapter.refuse_native_turn(turn_id)
    await host.db(native_goals.refused_turn, host.session_id, turn_id, reason)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REFUSED_TURN_WAIT
    # the next turn/start waits for the refused turn's end (one turn at a time natively)
    while turn_id in adapter._refused_turns and loop.time() < deadline and adapter.alive:
        await asyncio.sleep(0.02)


async def _pause(host: SessionHost, adapter: Any) -> None:
    """Pause the native goal and record it (a runtime that refuses changes nothing)."""
    with contextlib.suppress(errors.RuntimeAdapterError):
        native = await adapter.goal_set(status="paused", **ORIGIN)
        adapter.goal_updates = []
        await host.db(native_goals.record, host.session_id, native, command=None)


async def admit_waiting(host: SessionHost, session: Any) -> bool:
    """Serve (or refuse) the oldest continuation the runtime started; True if there was
    one."""
    adapter = _goal_adapter(host)
    waiting = adapter.waiting_native_turn() if adapter is not None else None
    if waiting is None:
        return False
    turn_id, native_then = waiting
    why = await host.db(native_goals.admissible, host.session_id, adapter.native_session_id,
                        native_then)
    if why is not None:
        await _refuse(host, adapter, turn_id, why)
        if why in ("unauthorized", "other_native_thread", "objective_mismatch") \
                and goal_active(host):
            await _pause(host, adapter)  # a goal nobody authorized (e.g. the model's own)
        return True
    turn = await host.db(native_goals.goal_turn, host.session_id, turn_id)
    if turn is None:
        await _refuse(host, adapter, turn_id, "session_archived")
        return True
    prompt = await host.db(services.turn_prompt, session)
    await host._serve_turn(turn, prompt)
    return True


async def resume_preempted(host: SessionHost) -> None:
    """The input queue is empty: a goal that input paused (and nobody revoked) goes on.
    Blocked, usage- or budget-limited and complete goals are never resumed here."""
    adapter = _goal_adapter(host)
    if adapter is None or not adapter.goal or adapter.goal.get("status") != "paused":
        return
    row = await host.db(native_goals.current, host.session_id)
    if row is None or not row.preempted:
        return
    await host.db(native_goals.set_flags, host.session_id, preempted=False)
    if not row.authorized:
        return
    try:
        native = await adapter.goal_set(status="active", **ORIGIN)
    except errors.RuntimeAdapterError:
        log.warning("resuming the preempted goal failed", exc_info=True)
        return
    adapter.goal_updates = []
    await host.db(native_goals.record, host.session_id, native, command="resume")
