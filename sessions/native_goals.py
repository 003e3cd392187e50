"""Native goals: the commands people send and the authorization the host checks.

A message that starts with a goal command (``sessions.native_goal_commands``) is not an input for
the model when the session's running runtime declared the goal feature (``runtime_facts
["goals"]``, probed by the adapter, never guessed from the agent's name): ``intercept``
checks it against the goal as amux knows it, changes the persisted authorization
(``SessionGoal``) and sends the command to the session's host through the control channel
in one transaction. The host carries it out natively (``sessions.native_goal_host``) and reports
what the runtime answered with ``record``. Goal state is shown as session-level timeline
events ``goal.updated`` / ``goal.cleared`` (the payload of ``INTERFACES.md``); the last one
is kept on the row (``snapshot``) and shown on the session.

Authority (seed 000): a native continuation is admitted (``admissible``) only while the
goal is authorized, the native thread is the one the goal was set on and the runtime's
objective is amux's; ``goal pause``, ``goal clear`` and an explicit interrupt revoke it;
ordinary input only preempts (``preempted``), and the host resumes the goal after the
input queue. An unfinished goal is never replaced implicitly (``goal set`` does that) and
no budget is set unless asked.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from sessions import control, hosting, locks, native_goal_commands, timeline
from sessions.core.turns import GOAL_TURN
from sessions.models import Lifecycle, Session, SessionGoal, Turn, TurnState
from sessions.native_goal_commands import GoalCommand

UNFINISHED = frozenset({"active", "paused", "blocked", "usageLimited", "budgetLimited"})
RESUMABLE = frozenset({"paused", "blocked", "usageLimited", "budgetLimited"})
GOAL_ORIGIN = {"via": "goal"}
# the surfaces where a person types: only their messages may be goal commands
PEOPLE = frozenset({"web", "lark", "api"})


class GoalRefused(Exception):
    """A goal command that cannot be carried out now; ``code`` for the API."""

    def __init__(self, message: str, code: str = "goal_refused", status: int = 409):
        super().__init__(message)
        self.code = code
        self.status = status


def supported(session: Session) -> bool:
    """The session's running runtime declared the goal feature (Codex: ``thread/goal/get``
    answered); unknown until its runtime has started once."""
    return (session.runtime_facts or {}).get("goals") is True


# ------------------------------------------------------------------------ payloads
def native_view(native: dict[str, Any] | None) -> dict[str, Any] | None:
    """The native goal as the timeline shows it (state, usage and time from the runtime)."""
    if not native:
        return None
    return {"objective": native.get("objective", ""), "status": native.get("status"),
            "token_budget": native.get("tokenBudget"),
            "tokens_used": native.get("tokensUsed", 0),
            "time_used_seconds": native.get("timeUsedSeconds", 0)}


def payload(row: SessionGoal | None, command: str | None, *, refused: str | None = None,
            goal: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "goal": goal if goal is not None else native_view(row.snapshot if row else None),
        "goal_key": row.goal_key if row else "",
        "command": command,
        "location": row.location if row else None,
        "generation": row.generation if row else 0,
        "authorized": bool(row and row.authorized),
    }
    if refused:
        data["refused"] = refused
    return data


def state(session_id: int) -> dict[str, Any] | None:
    """The session's goal now, as ``GET sessions/<id>`` shows it (None: no goal)."""
    row = SessionGoal.objects.filter(session_id=session_id).first()
    if row is None or not (row.goal_key or row.snapshot):
        return None
    return payload(row, None)


# ------------------------------------------------------------------------ commands
def intercept(session_id: int, text: str | None, origin: dict[str, Any] | None = None
              ) -> dict[str, Any] | None:
    """A goal command's outcome (the goal, or why not), or None: ordinary text (not a
    command, not typed by a person — ``origin.via`` web, lark or api —, or the runtime
    declares no goal feature) that goes on as an input."""
    if (origin or {}).get("via") not in PEOPLE:
        return None  # a schedule's, a task's or a ticket's prompt is never a command
    command = native_goal_commands.parse(text)
    if command is None:
        return None
    if (origin or {}).get("goal_deferred"):
        return None  # a deferred `goal <text>` the started runtime had no goals for
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return None
    if not supported(session):
        if command.verb == "create" and not command.error and _undeclared(session):
            return defer(session, text or "", origin)
        return None
    try:
        return run(session_id, command, origin)
    except GoalRefused as exc:
        return refuse(session_id, command.verb, str(exc))


def _undeclared(session: Session) -> bool:
    """The runtime has not run yet, so it has not said whether it has goals."""
    return "goals" not in (session.runtime_facts or {}) and (
        session.lifecycle != Lifecycle.ARCHIVED)


def defer(session: Session, text: str, origin: dict[str, Any] | None) -> dict[str, Any]:
    """`goal <text>` as a new session's first words (a Lark topic opened with a goal): the
    runtime must start before it can say whether it has goals, so the host decides once it
    has (native_goal_host.deferred) and the goal is created then — or the text goes on as an
    ordinary input, as it would on a runtime without goals. No turn is made for it now."""
    request_id = uuid.uuid4().hex[:12]
    message = {"verb": "deferred", "text": text, "origin": origin, "request_id": request_id}
    with transaction.atomic():
        transaction.on_commit(lambda: control.send(session.pk, "goal", **message))
        hosting.wake(session.pk, session)
    return {"goal": None, "goal_key": "", "command": "create", "deferred": True,
            "location": origin, "request_id": request_id}


def refuse(session_id: int, verb: str, reason: str) -> dict[str, Any]:
    """A refusal, on the timeline too (where a chat surface shows it)."""
    row = SessionGoal.objects.filter(session_id=session_id).first()
    data = payload(row, verb, refused=reason)
    timeline.note(session_id, "goal.updated", data)
    return data


def run(session_id: int, command: GoalCommand, origin: dict[str, Any] | None = None,
        *, goal_key: str | None = None) -> dict[str, Any]:
    """Carry out ``command``: the authorization changes and the host is told, in one
    transaction. ``goal_key``: the goal the caller means (a card's); another goal is
    refused. Raises ``GoalRefused``."""
    if command.error:
        raise GoalRefused(command.error, code="invalid_goal_command", status=400)
    with transaction.atomic():
        session = locks.session(session_id)
        if session.lifecycle == Lifecycle.ARCHIVED:
            raise GoalRefused("the session is archived", code="session_archived")
        if not supported(session):
            raise GoalRefused("this session's runtime has no native goals",
                              code="goal_unsupported")
        row = locks.goal(session.pk)
        if goal_key is not None and goal_key != row.goal_key:
            raise GoalRefused("this card belongs to a goal that has been replaced or "
                              "cleared", code="stale_goal")
        status = (row.snapshot or {}).get("status") if row.goal_key else None
        verb = command.verb
        if verb == "status":
            data = payload(row, verb)
            data["asked_at"] = origin  # asking elsewhere does not move the output
            timeline.note(session_id, "goal.updated", data)
            return data
        previous_key = row.goal_key
        _authorize(row, verb, status, command, origin)
        row.save()
        request_id = uuid.uuid4().hex[:12]
        message = {"verb": verb, "text": command.text, "budget": command.budget,
                   "goal_key": row.goal_key, "previous_key": previous_key,
                   "request_id": request_id}
        transaction.on_commit(lambda: control.send(session_id, "goal", **message))
        hosting.wake(session_id, session)
        data = payload(row, verb)
        data["request_id"] = request_id
        return data


def _authorize(row: SessionGoal, verb: str, status: str | None, command: GoalCommand,
               origin: dict[str, Any] | None) -> None:
    """The authorization ``verb`` leaves (on ``row``, not saved), or ``GoalRefused``."""
    if verb in ("create", "set"):
        if verb == "create" and row.goal_key and status != "complete":
            raise GoalRefused("a goal is already set and not finished; replace it with "
                              "`goal set <text>`, or end it with `goal clear`")
        row.goal_key = uuid.uuid4().hex[:16]
        row.objective = command.text
        row.authorized = True
        row.preempted = False
        row.location = origin
        row.generation += 1  # old goal cards go inert
        return
    if not row.goal_key:
        raise GoalRefused("there is no goal; start one with `goal <text>`", code="no_goal")
    if verb == "pause":
        if status != "active" and not row.authorized:
            raise GoalRefused(f"the goal is not running (it is {status or 'starting'})")
        row.authorized = False
        row.preempted = False
    elif verb == "resume":
        if status == "complete":
            raise GoalRefused("the goal is complete; start a new one with `goal <text>`")
        if status not in RESUMABLE:
            raise GoalRefused(f"the goal is already {status or 'starting'}")
        row.authorized = True
        row.preempted = False
    elif verb == "clear":
        row.goal_key = ""
        row.objective = ""
        row.authorized = False
        row.preempted = False
        row.location = None
        row.generation += 1
    elif verb == "budget" and status == "complete":
        raise GoalRefused("the goal is complete; a budget would change nothing")


# ------------------------------------------------------------------------ the host's side
def record(session_id: int, native: dict[str, Any] | None, *, command: str | None = None,
           native_thread: str | None = None, refused: str | None = None,
           cleared: bool = False, goal_key: str | None = None) -> None:
    """What the runtime answered or reported, on the row and the timeline. A report equal
    to the last one (apart from its clock) is not repeated."""
    with transaction.atomic():
        locks.session_held(session_id)
        if cleared and command is None and not _runtime_has_goal(session_id):
            # the runtime reports clearing a goal it never had, or one already cleared
            # (Codex does on a resumed thread): nothing changed, so nobody is told
            return
        row = locks.goal(session_id)
        if cleared:
            location = row.location
            row.snapshot = None
            row.save()
            timeline.note(session_id, "goal.cleared", {
                "goal_key": goal_key if goal_key is not None else row.goal_key,
                "command": command, "location": location})
            return
        unchanged = _same(row.snapshot, native)
        if native is not None:
            row.snapshot = native
        if native_thread:
            row.native_thread = native_thread
        row.save()
        if unchanged and command is None and refused is None:
            return
        data = payload(row, command, refused=refused)
        timeline.note(session_id, "goal.updated", data)


def _runtime_has_goal(session_id: int) -> bool:
    """The runtime's last report (or answer) about this session's goal named one."""
    return SessionGoal.objects.filter(session_id=session_id, snapshot__isnull=False).exists()


def _same(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    def strip(goal: dict[str, Any] | None) -> dict[str, Any] | None:
        return {k: v for k, v in goal.items() if k != "updatedAt"} if goal else goal

    return strip(old) == strip(new)


def admissible(session_id: int, native_thread: str | None,
               native: dict[str, Any] | None) -> str | None:
    """Why a continuation the runtime started (with the native goal ``native`` as it was
    then) may not run; None: it is the authorized goal's turn."""
    if Session.objects.filter(pk=session_id, lifecycle=Lifecycle.ARCHIVED).exists():
        return "session_archived"
    row = SessionGoal.objects.filter(session_id=session_id).first()
    if row is None or not row.goal_key or not row.authorized:
        return "unauthorized"
    if not native_thread or row.native_thread != native_thread:
        return "other_native_thread"
    if not native or native.get("objective") != row.objective:
        return "objective_mismatch"
    if native.get("status") != "active":
        return f"goal_{native.get('status')}"
    return None


def goal_turn(session_id: int, native_turn_id: str) -> Turn | None:
    """The canonical turn of an admitted continuation (queued, served at once); None when
    the session was archived after the continuation was admitted."""
    row = SessionGoal.objects.get(session_id=session_id)
    try:
        turn, _ = timeline.enqueue_input(
            session_id, row.objective, key=f"goal:{row.goal_key}:{native_turn_id}",
            command=GOAL_TURN, origin={**GOAL_ORIGIN, "goal_key": row.goal_key})
    except timeline.SessionArchived:
        return None
    return turn


def refused_turn(session_id: int, native_turn_id: str, reason: str) -> None:
    """A continuation the runtime started that amux did not admit: interrupted, kept
    only as this record (never as anyone's turn)."""
    timeline.note(session_id, "goal.continuation_refused",
                  {"native_turn_id": native_turn_id, "reason": reason})


def set_flags(session_id: int, **flags: bool) -> SessionGoal | None:
    """Change ``authorized`` / ``preempted`` (the host's side: an interrupt revokes, input
    preempts)."""
    with transaction.atomic():
        row = locks.goal_if_any(session_id)
        if row is None:
            return None
        for name, value in flags.items():
            setattr(row, name, value)
        row.save()
        return row


def forget(session_id: int, command: str) -> None:
    """The native conversation was replaced (session clear): its goal, authorization and
    output location go; old cards go inert."""
    with transaction.atomic():
        row = locks.goal_if_any(session_id)
        if row is None or not (row.goal_key or row.snapshot):
            return
        key, location = row.goal_key, row.location
        row.goal_key, row.objective, row.location, row.snapshot = "", "", None, None
        row.authorized = row.preempted = False
        row.generation += 1
        row.save()
        timeline.note(session_id, "goal.cleared", {"goal_key": key, "command": command,
                                                   "location": location})


def input_waiting(session_id: int) -> bool:
    """An ordinary input is queued (not a goal turn)."""
    return Turn.objects.filter(session_id=session_id, state=TurnState.QUEUED).exclude(
        input__command=GOAL_TURN).exists()


def current(session_id: int) -> SessionGoal | None:
    return SessionGoal.objects.filter(session_id=session_id).first()
