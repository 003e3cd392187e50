"""One turn served by a session's host, from its input to its terminal event.

Three jobs run side by side while the runtime works: the runtime's events go onto a queue
(``consume``), the database thread stores what has arrived batch after batch (``write``),
and the session's control channel is answered (``controls``: interrupts, answers,
permissions, goal commands; sleep, archive, model and clear wait for the turn's end).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from runtimes import TurnInput, errors
from runtimes.events import ErrorObserved, QuestionAnswered, TurnFailed
from sessions import control, native_goal_host, native_goals, services, timeline
from sessions.models import Turn

if TYPE_CHECKING:
    from sessions.host import SessionHost

log = logging.getLogger("sessions.host")

OPEN = object()  # writer marker: open the turn (turn.started) before its first event


# Progress events (deltas, tools, usage) are stored in batches gathered this long: a
# runtime emits them a few ms apart, and a transaction for each costs CPU that, on a small
# machine, the runtime itself is waiting for (a Codex turn's end came ~7 ms later with
# every event stored at once). A terminal is stored at once, with whatever waits.
GATHER_SECONDS = 0.02
CONTROLS_AFTER_END = 120.0  # seconds the turn's control reader may take to reach its marker


class EventQueue:
    """A turn's events on their way from the host's loop to its database thread: put on
    the loop, taken all at once on the thread; ``arrived()`` waits (on the loop) until
    something was put since the last ``take_all``, then lets a batch gather."""

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._waiting = asyncio.Event()
        self._urgent = asyncio.Event()

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        self._waiting.set()
        if _urgent(item):
            self._urgent.set()

    async def put(self, item: Any) -> None:
        self.put_nowait(item)

    def take_all(self) -> list[Any]:
        taken = []
        with contextlib.suppress(IndexError):
            while True:
                taken.append(self._items.popleft())
        return taken

    async def arrived(self, gather: float = 0.0) -> None:
        """Something is waiting; progress waits up to ``gather`` seconds more for the
        events right behind it, unless what opens or ends the turn comes (then at once).
        Only while nothing takes (the writer calls this between its batches)."""
        while True:
            await self._waiting.wait()
            self._waiting.clear()
            if self._items:  # else the writer took them already: wait for the next
                break
        if gather <= 0 or any(_urgent(item) for item in self._items):
            return
        self._urgent.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._urgent.wait(), gather)


def _urgent(item: Any) -> bool:
    """The turn's opening, its terminal or its end: stored without gathering."""
    return item is None or item is OPEN or getattr(item, "terminal", False)


class TurnService:
    def __init__(self, host: SessionHost, turn: Turn, prompt: services.TurnPrompt) -> None:
        assert host.adapter is not None
        self.host, self.turn, self.adapter = host, turn, host.adapter
        # Events go to the database thread through a thread-safe queue: the writer there
        # stores what has arrived, batch after batch, without a trip back to this loop in
        # between (a terminal arriving while a batch is stored is stored right after it).
        self.queue = EventQueue()
        # the turn is opened by the writer (first, in order) while the runtime already works
        self.queue.put_nowait(OPEN)
        stored = turn.input or {}
        images = [(i.get("mime_type", "image/png"), i.get("data", ""))
                  for i in stored.get("images") or []]
        parts = [("text", p.get("text", "")) if p.get("type") == "text" else
                 ("image", p.get("mime_type", ""), p.get("data", ""))
                 for p in stored.get("parts") or []]
        text = stored.get("text", "")
        if host.handoff and not stored.get("command"):
            # the first message of a new conversation that replaced a lost one carries
            # the old one (the runtime sees it; the timeline keeps the input as sent)
            text = f"{host.handoff}\n\n{text}"
            if parts:
                parts = [("text", host.handoff), *parts]
            host.handoff = None
        self.turn_input = TurnInput(text=text, images=images,
                                    system_prompt=prompt.text, parts=parts,
                                    command=stored.get("command"))
        self.is_goal_turn = stored.get("command") == native_goals.GOAL_TURN
        # decided before the runtime sees the turn (an inline block is sent only once)
        self.prompt_facts: dict[str, Any] = {"prompt_revisions": prompt.revisions}
        if prompt.text and not self.is_goal_turn:  # a goal turn is the runtime's: no prompt
            self.prompt_facts.update(prompt_role=prompt.role,
                                     **self.adapter.prompt_plan(prompt.text))
        self.carry: list[Any] = []  # the batch being stored: kept for db()'s one retry
        self.started: list[asyncio.Task[Any]] = []  # goal commands, run to their end
        self.deferred: list[dict[str, Any]] = []  # model and clear: once the turn ended
        # set when the runtime has sent the turn's terminal: from then on the reader answers
        # as the idle host does (a late answer or interrupt is refused on the timeline)
        self.ended = False

    async def run(self) -> list[dict[str, Any]]:
        """Serve the turn; answers the commands put off until it has ended."""
        control_task = asyncio.create_task(self.controls())
        try:
            await asyncio.gather(self.consume(), self.write())
        finally:
            await self._end_controls(control_task)
            for task in self.started:
                with contextlib.suppress(Exception):
                    await task
        return self.deferred

    async def consume(self) -> None:
        try:
            async for event in self.adapter.run_turn(self.turn_input):
                if getattr(event, "terminal", False):
                    self.ended = True
                await self.queue.put(event)
        except errors.AppServerLost:
            pass  # no terminal here: the host ends the turn as a lost host's (host.py)
        except errors.RuntimeAdapterError as exc:
            await self.queue.put(TurnFailed(code=exc.code, message=str(exc)))
        except Exception as exc:  # never leave a turn without its terminal
            log.exception("turn failed in the host")
            await self.queue.put(ErrorObserved(code="host_error", message=repr(exc)[:500]))
            await self.queue.put(TurnFailed(code="host_error", message=str(exc)[:500]))
        finally:
            self.ended = True
            await self.queue.put(None)

    def store_arrived(self) -> bool:
        """On the database thread: store batches until none is waiting; True once the
        turn's last event (None) is stored."""
        carry, session_id = self.carry, self.host.session_id
        while True:
            if not carry:
                carry.extend(self.queue.take_all())
                if not carry:
                    return False
            if carry[0] is OPEN:
                # stored, then published after commit (sessions.publisher)
                timeline.start_turn(session_id, self.turn.pk, prompt=self.prompt_facts)
                carry.pop(0)
            events = [e for e in carry if e is not None]
            if events:
                timeline.record(session_id, self.turn.pk, events)
            ended = any(e is None for e in carry)
            carry.clear()
            if ended:
                return True

    async def write(self) -> None:
        while not await self.host.db(self.store_arrived):
            await self.queue.arrived(GATHER_SECONDS)

    async def controls(self) -> None:
        """Answer the control channel until this turn's end marker comes: what arrived
        before it is this turn's to answer, what comes after waits for the host."""
        host = self.host
        while True:
            msg = await control.pop(host._redis, host.session_id, host.poll)
            await native_goal_host.observe(host)
            if msg is None:
                continue
            if msg.get("op") == control.TURN_END:
                if msg.get("turn") == self.turn.pk:
                    return
                continue  # a marker left by an earlier host of this session
            await self.control(msg)

    async def _end_controls(self, control_task: asyncio.Task[None]) -> None:
        """Stop answering controls once the turn has ended, losing no message: the reader
        is told with a marker behind whatever waits (a cancelled pop could drop a message
        Redis had already handed over; a goal command lost so left its goal running)."""
        try:
            if not control_task.done():
                await control.mark_turn_end(self.host._redis, self.host.session_id,
                                            self.turn.pk)
            # a command taken before the marker runs to its end (each native call is bounded)
            await asyncio.wait_for(asyncio.shield(control_task), CONTROLS_AFTER_END)
        except asyncio.CancelledError:
            control_task.cancel()
            raise
        except Exception:  # Redis gone: the host's own loop finds out and reports it
            log.warning("the control channel failed while a turn ran", exc_info=True)
            control_task.cancel()
            with contextlib.suppress(BaseException):
                await control_task

    async def control(self, msg: dict[str, Any]) -> None:
        """One message of the session's control channel while the turn runs."""
        host, op = self.host, msg.get("op")
        if self.ended and op not in ("model", "clear"):
            # the turn is over, though its end is still being stored: no runtime call
            await host._command_while_idle(msg)
        elif op == "goal":
            await self.finish(native_goal_host.apply(host, msg, goal_turn=self.is_goal_turn))
        elif op == "input" and self.is_goal_turn:
            # ordinary input preempts a goal turn (the goal keeps its authorization)
            await self.finish(native_goal_host.preempt(host, running_goal_turn=True))
        elif op in ("sleep", "archive"):
            host.retire = op  # applied once this turn has ended
        elif op in ("model", "clear"):
            self.deferred.append(msg)  # between turns only: applied once this one ended
        elif op == "interrupt" and msg.get("turn") not in (None, self.turn.seq):
            # meant for a turn that has ended: never cut the next one short
            await host.db(timeline.note, host.session_id, "control.refused", {
                "op": op, "turn": msg["turn"], "reason": "the turn had already ended"})
        else:
            await self.to_runtime(op, msg)

    async def to_runtime(self, op: str | None, msg: dict[str, Any]) -> None:
        if op == "interrupt":
            await native_goal_host.revoke(self.host)  # an explicit interrupt revokes the goal
        with contextlib.suppress(errors.RuntimeAdapterError):
            if op == "interrupt":
                await self.adapter.interrupt()
            elif op == "permission":
                await self.adapter.answer_permission(msg["request_id"], msg.get("option_id"))
            elif op == "answer":
                await self.adapter.answer_question(msg["request_id"], msg.get("answers"))
                await self.queue.put(QuestionAnswered(request_id=msg["request_id"]))

    async def finish(self, work: Any) -> None:
        """A goal command runs to its end even when the turn ends meanwhile (its native
        call and its record belong together)."""
        task = asyncio.create_task(work)
        self.started.append(task)
        await asyncio.shield(task)
