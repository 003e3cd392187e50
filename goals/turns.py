"""loopx_turn_v0: one bounded, idempotent turn of a managed agent (seed 003, "Managed loop
controller"). The envelope (``GoalTurn``) is the only record; ``state`` names the last step
whose effect committed with it:

    request  → queued     fresh goal state, gate, todo selected and claimed (or skipped)
    dispatch → running    the todo posted into the working session (key "loopx-<key>")
    validate → validated  the session turn ended; amux ran the goal's check_command itself
    write    → written    binding rechecked; todo done with evidence, or the failure kept
    settle   → done       quota spent only for an accepted, passed writeback; hint chosen
    cancel   → cancelled  an operator's cancel before the writeback: its session turn
                          interrupted, nothing written back, nothing spent, hint ``stop``

``advance`` runs the next steps; every step locks the envelope and checks its state
first, so two workers, or a replay after a crash, never post, write or spend twice. The
session turn's key comes from the envelope's key, so even a post whose commit was lost
is found again rather than repeated.

The supervisor of an envelope is its outbox row (kind ``goals.turn``, key ``turn:<id>``),
written with the envelope and pending while it is in flight (``drive``): it posts the
todo, then waits, due again only when the attempt's timeout comes (to interrupt it); the
session turn's ``session.turn_ended`` fact makes it due at once (goals/turn_end.py).
amux's check runs in the ``goals.turn`` Celery task on the machine that holds the work
directory (bounded by the check's own timeout, not the drainer's), which hands the
envelope back to its row. A drainer or a worker that dies loses nothing: the row's lease
expires, or its wait ends, and it runs again."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from effects import outbox
from goals import actions, checks, inbox_turns, ingress, locks
from goals.core import inbox_turns as inbox_rules
from goals.core import ingress as ingress_rules
from goals.core import lifecycle as lc
from goals.core import quota
from goals.core import turns as rules
from goals.core.lifecycle import Refused
from goals.models import Agent, Goal, GoalTurn, Todo
from sessions import services, session_commands, timeline
from sessions.core.turns import ENDED
from sessions.models import Turn

log = logging.getLogger(__name__)

EFFECT_KIND = "goals.turn"  # the outbox row that supervises one envelope
CHECK_TASK = "goals.turn"  # the Celery task that runs amux's check where the work is
INTERRUPT_RETRY_S = 15  # an overdue attempt its session would not interrupt yet: ask again
WAKE_FLOOR_S = 300  # a row waiting for a turn's end is woken by its fact; a floor only


def attempt_timeout_s() -> int:
    """How long one attempt may run before the supervisor interrupts it (bounded turns)."""
    return int(getattr(settings, "AMUX_GOAL_TURN_TIMEOUT_S", 1800))


def session_turn_key(turn: GoalTurn) -> str:
    return f"loopx-{turn.key}"


def _facts(goal: Goal) -> list[rules.TodoFact]:
    return [rules.TodoFact(t.pk, t.state, t.claimed_by_id) for t in goal.todos.all()]


def key_of(turn_pk: int) -> str:
    return f"turn:{turn_pk}"


def enqueue(turn_pk: int) -> None:
    """In the caller's transaction: the envelope's supervisor row, due now after commit
    (written, or made due again with its place kept)."""
    outbox.enqueue(EFFECT_KIND, key_of(turn_pk), {"turn": turn_pk})


# ---------------------------------------------------------------------------- request
def request(goal_slug: str, agent_slug: str, *, key: str,
            todo: int | None = None) -> tuple[GoalTurn, bool]:
    """The envelope for ``key``: the stored one (``created`` False) or a new one — queued
    with its todo claimed, or skipped by the gate. Refused: an agent that is not managed
    (409 ``wrong_mode``), without a live working session, or with a turn in flight."""
    rules.check_key(key)
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)  # its goal first
        seen = agent.turns.filter(key=key).first()
        if seen is not None:
            return seen, False
        if agent.mode != lc.MANAGED:
            raise Refused("only a managed agent runs turns", code="wrong_mode", field="mode")
        status, binding = ingress.session_status(agent)
        if status != ingress_rules.LIVE:
            raise Refused(f"the agent has no live working session ({status})", code=status)
        busy = agent.turns.filter(state__in=rules.IN_FLIGHT).first()
        if busy is not None:
            raise Refused(f"turn {busy.key!r} is still in flight: one at a time",
                          code="turn_in_flight", field="key")
        goal = Goal.objects.get(pk=agent.goal_id)  # fresh state, locked by agent_of
        skip = rules.gate(goal_state=goal.state,
                          quota_remaining=quota.remaining(goal.quota_limit, goal.quota_spent),
                          has_check=bool(goal.check_command.strip()))
        chosen = None
        if skip is None and inbox_turns.reply_due(agent, timezone.now()):
            # the inbox answers first (seed 003): this turn is skipped, the lane drives
            skip = rules.Skip(rules.REPLY_DUE, "continue")
            inbox_turns.schedule(agent.pk)
        if skip is None:
            picked = rules.select_todo(_facts(goal), agent.pk, todo)
            if isinstance(picked, rules.Skip):
                skip = picked
            else:
                chosen = picked
        envelope = GoalTurn(goal=goal, agent=agent, key=key, session=binding.session)
        if skip is not None:
            envelope.state, envelope.reason, envelope.hint = rules.SKIPPED, skip.reason, skip.hint
        else:
            if chosen.state == "open":
                actions.change_todo_in_txn(goal.slug, chosen.id, state="claimed",
                                           agent=agent.slug)
            envelope.state, envelope.todo_id = rules.QUEUED, chosen.id
        try:
            with transaction.atomic():
                envelope.save()
        except IntegrityError as exc:  # the constraints behind the locks above
            raise Refused("another turn of this agent is in flight", code="turn_in_flight",
                          field="key") from exc
        if envelope.state == rules.QUEUED:
            enqueue(envelope.pk)
        return envelope, True


# ---------------------------------------------------------------------------- advance
def advance(turn_pk: int, *, check: bool = True) -> GoalTurn:
    """Run the envelope's next steps until it is done, or waits on its session turn, or
    (``check`` False, or its work directory on another machine) on amux's check."""
    steps = {rules.QUEUED: _dispatch, rules.RUNNING: lambda t: _validate(t, check=check),
             rules.VALIDATED: _write, rules.WRITTEN: _settle}
    for _ in range(len(steps) + 1):
        turn = GoalTurn.objects.get(pk=turn_pk)
        step = steps.get(turn.state)
        if step is None or not step(turn):
            return GoalTurn.objects.get(pk=turn_pk)
    return GoalTurn.objects.get(pk=turn_pk)


def drive(effect_id: int, payload: dict) -> None:
    """The ``goals.turn`` outbox handler, the envelope's supervisor: every step that needs
    no check, then the check sent where the work directory is, or a wait until the
    attempt's timeout (the session turn's end makes the row due sooner). A settled
    envelope lets the agent's next turn start when it runs by itself."""
    turn = advance(int(payload["turn"]), check=False)
    log.info("goals turn %s (%s) supervised: %s", turn.pk, turn.key, turn.state)
    if turn.state not in rules.IN_FLIGHT:
        supervise(turn.agent_id)
        return
    if check_due(turn):
        _send_check(turn)
        # the task hands the envelope back when it is done; if it is lost, send it again
        raise outbox.Later(checks.check_timeout_s() + CHECK_MARGIN_S, "amux's check runs")
    raise outbox.Later(_wait_s(turn, timezone.now()), "the attempt runs")


CHECK_MARGIN_S = 120  # the check task's time beyond the check itself (its time limit too)


def _wait_s(turn: GoalTurn, now) -> float:
    """Until when nobody needs to look at a running attempt: its timeout (then it is
    interrupted), or, once interrupted, its end, which its fact reports."""
    if turn.attempt.get("interrupted"):
        return WAKE_FLOOR_S
    if turn.dispatched_at is None:
        return INTERRUPT_RETRY_S
    left = (turn.dispatched_at + timedelta(seconds=attempt_timeout_s()) - now).total_seconds()
    if left <= 0 or turn.attempt.get("cancel_requested"):
        return INTERRUPT_RETRY_S  # its interrupt was refused (not started yet): ask again
    return left + 1


def check_due(turn: GoalTurn) -> bool:
    """The attempt ended and amux's check (not a cancel) comes next."""
    return (turn.state == rules.RUNNING and not turn.attempt.get("cancel_requested")
            and Turn.objects.filter(pk=turn.session_turn_id, state__in=ENDED).exists())


def _send_check(turn: GoalTurn) -> None:
    """The check task, by name (tasks sit above this module), to the runtime queue of the
    machine holding the work directory, or to the default queue when that is here."""
    from celery import current_app

    current_app.send_task(CHECK_TASK, kwargs={"turn_pk": turn.pk},
                          queue=check_queue(turn) or "default")


def run_check_step(turn_pk: int) -> GoalTurn:
    """What the check task does: the check and the steps after it, then the envelope back
    to its row (which starts the agent's next turn, or sends the check elsewhere again
    when the work directory moved meanwhile)."""
    turn = advance(turn_pk)
    enqueue(turn_pk)  # its own transaction: the row is due once this is committed
    return turn


def _locked(turn: GoalTurn, state: str, *, goal_first: bool = False) -> GoalTurn | None:
    """The envelope locked, if it is still at ``state`` (else another run took the step);
    ``goal_first``: its goal locked before it, for a step that writes the goal or a todo."""
    row = locks.turn(turn.pk, goal_first=goal_first)
    return row if row is not None and row.state == state else None


def _still_bound(turn: GoalTurn) -> str:
    agent = Agent.objects.get(pk=turn.agent_id)
    status, binding = ingress.session_status(agent)
    if status == ingress_rules.LIVE and binding.session_id != turn.session_id:
        return "session_replaced"
    return status


def _prompt(turn: GoalTurn) -> str:
    goal, todo = turn.goal, turn.todo
    lines = [f"LoopX turn {turn.key} for goal “{goal.title}”.",
             f"Todo #{todo.pk}: {todo.title}"]
    if goal.description:
        lines += ["", goal.description]
    lines += ["", "Work on this todo now, in this working directory. When you stop, amux "
              f"checks the result itself by running: {goal.check_command}"]
    return "\n".join(lines)


def _dispatch(turn: GoalTurn) -> bool:
    with transaction.atomic(durable=True):
        row = _locked(turn, rules.QUEUED)
        if row is None:
            return True
        bound = _still_bound(row)
        if bound != ingress_rules.LIVE:
            _end_unattempted(row, bound)
            return False
        try:
            session_turn = services.post_message(
                row.session_id, _prompt(row), key=session_turn_key(row),
                origin={"via": "loopx", "goal": row.goal.slug, "agent": row.agent.slug,
                        "turn": row.key})
        except services.CommandError as exc:
            _end_unattempted(row, exc.code or "session_refused")
            return False
        row.session_turn, row.state, row.dispatched_at = session_turn, rules.RUNNING, timezone.now()
        row.save(update_fields=["session_turn", "state", "dispatched_at", "updated_at"])
    return True


def _end_unattempted(row: GoalTurn, reason: str) -> None:
    """Nothing was posted: the envelope ends with no writeback and no spend; the todo keeps
    this agent's claim for its next turn."""
    row.state, row.reason, row.hint = rules.DONE, reason[:40], "wait"
    row.writeback = {"accepted": False, "reason": reason}
    row.save(update_fields=["state", "reason", "hint", "writeback", "updated_at"])


def _mark(turn_pk: int, **flags: Any) -> None:
    """Add flags to the envelope's ``attempt`` under its lock (a cancel may write there)."""
    with transaction.atomic(durable=True):
        row = locks.turn(turn_pk, goal_first=False)
        if row is not None:
            row.attempt = {**row.attempt, **flags}
            row.save(update_fields=["attempt", "updated_at"])


def _interrupt(turn: GoalTurn, session_turn_pk: int) -> bool:
    """Interrupt this envelope's own session turn (never another one running in the same
    session), through the session's interrupt path; True once it was asked."""
    try:
        services.interrupt(turn.session_id, turn_id=session_turn_pk)
    except services.CommandError:
        return False  # not running yet, or ended meanwhile: looked at again next time
    _mark(turn.pk, interrupted=True)
    return True


def _attempt(turn: GoalTurn) -> dict[str, Any] | None:
    """The session turn's outcome once it ended, else None (interrupting it once when it
    has run past the attempt timeout: a turn stays bounded)."""
    session_turn = Turn.objects.filter(pk=turn.session_turn_id).first()
    if session_turn is None:  # the session was deleted under the turn
        return {"turn_state": "lost", "error_code": "session_turn_lost", "tokens": 0}
    if session_turn.state not in ENDED:
        overdue = _overdue(turn.dispatched_at, timezone.now())
        if (overdue or turn.attempt.get("cancel_requested")) and not turn.attempt.get(
                "interrupted"):
            _interrupt(turn, session_turn.pk)
        return None
    return {"turn_state": session_turn.state, "error_code": session_turn.error_code,
            "tokens": timeline.turn_tokens(session_turn), "interrupted": bool(
                turn.attempt.get("interrupted"))}


def run_check(turn: GoalTurn) -> dict[str, Any]:
    """amux's own validation of the attempt (goals/checks.py)."""
    return checks.run(turn.session, turn.goal.check_command)


def check_queue(turn: GoalTurn) -> str | None:
    """Where the envelope's next step must run: the runtime queue of the machine holding
    the session's work directory when the check is due and that is another machine."""
    if turn.state != rules.RUNNING or turn.session_id is None or not Turn.objects.filter(
            pk=turn.session_turn_id, state__in=ENDED).exists():
        return None
    return session_commands.home_queue(turn.session)


def _validate(turn: GoalTurn, *, check: bool = True) -> bool:
    attempt = _attempt(turn)
    if attempt is None:
        return False  # still running: its turn-ended fact (goals/turn_end.py) comes back
    # a cancelled attempt is not validated: it ends cancelled (under the lock, below)
    if not turn.attempt.get("cancel_requested") and (
            not check or check_queue(turn) is not None):
        return False  # the check task runs it, on the session's machine (drive)
    result = None if turn.attempt.get("cancel_requested") else run_check(turn)
    # the check runs outside any lock (it may take minutes); only its record is locked
    with transaction.atomic(durable=True):
        row = _locked(turn, rules.RUNNING)
        if row is None:
            return True
        # the interrupt may have been asked after this look began: the row has it
        attempt["interrupted"] = bool(attempt.get("interrupted")
                                      or row.attempt.get("interrupted"))
        if row.attempt.get("cancel_requested") or result is None:
            _end_cancelled(row, attempt)
            return False
        row.attempt, row.validation, row.state = attempt, result, rules.VALIDATED
        row.save(update_fields=["attempt", "validation", "state", "updated_at"])
    return True


def _evidence(row: GoalTurn) -> str:
    output = row.validation.get("output", "").strip()
    tail = output[-1500:] if output else "(no output)"
    return (f"loopx turn {row.key}: `{row.goal.check_command}` passed "
            f"(exit {row.validation.get('exit_code')})\n{tail}")


def _write(turn: GoalTurn) -> bool:
    with transaction.atomic(durable=True):
        row = _locked(turn, rules.VALIDATED, goal_first=True)
        if row is None:
            return True
        passed = bool(row.validation.get("passed"))
        bound = _still_bound(row)  # freshness before every writeback
        todo = Todo.objects.filter(pk=row.todo_id).first()
        if bound != ingress_rules.LIVE:
            writeback = {"accepted": False, "reason": bound}
        elif todo is None or todo.state != "claimed" or todo.claimed_by_id != row.agent_id:
            writeback = {"accepted": False, "reason": "todo_moved",
                         "todo": row.todo_id, "todo_state": todo.state if todo else None}
        elif passed:
            try:
                actions.change_todo_in_txn(row.goal.slug, todo.pk, state="done",
                                    evidence=_evidence(row))
            except Refused as exc:
                writeback = {"accepted": False, "reason": exc.code, "todo": todo.pk}
            else:
                writeback = {"accepted": True, "todo": todo.pk, "todo_state": "done"}
        else:
            # the failure is the record: the todo keeps this agent's claim, unchanged
            writeback = {"accepted": True, "todo": todo.pk, "todo_state": "claimed",
                         "recorded": "validation_failed"}
        row.writeback, row.state = writeback, rules.WRITTEN
        if not writeback["accepted"]:
            row.reason = writeback["reason"][:40]
        row.save(update_fields=["writeback", "state", "reason", "updated_at"])
    return True


def _settle(turn: GoalTurn) -> bool:
    with transaction.atomic(durable=True):
        row = _locked(turn, rules.WRITTEN, goal_first=True)
        if row is None:
            return True
        goal = Goal.objects.get(pk=row.goal_id)  # locked before the envelope
        passed = bool(row.validation.get("passed"))
        accepted = bool(row.writeback.get("accepted"))
        spent = 0
        if rules.charges(passed=passed, writeback_accepted=accepted):
            remaining = quota.remaining(goal.quota_limit, goal.quota_spent)
            # a tokens turn may overrun what is left: it spends the rest, and stops
            spent = min(rules.spend_amount(goal.quota_unit, row.attempt.get("tokens", 0)),
                        remaining)
            goal.quota_spent = quota.spend(goal.quota_limit, goal.quota_spent, spent)
            goal.save(update_fields=["quota_spent", "updated_at"])
        if not passed and not row.reason:
            row.reason = "validation_failed"
        row.quota_spent, row.state = spent, rules.DONE
        row.hint = rules.hint_after(
            goal_state=goal.state, passed=passed, writeback_accepted=accepted,
            quota_remaining=quota.remaining(goal.quota_limit, goal.quota_spent),
            todos=_facts(goal), agent=row.agent_id)
        row.save(update_fields=["quota_spent", "state", "hint", "reason", "updated_at"])
    return False


# ----------------------------------------------------------------------------- cancel
def _end_cancelled(row: GoalTurn, attempt: dict[str, Any] | None = None) -> None:
    """The one terminal of a cancelled envelope (its row locked): nothing is written back
    (the todo keeps this agent's claim, as after any unfinished attempt), nothing spent,
    and the hint says stop. Every step checks the state under the lock, so no replay of a
    step, and no redelivered task, takes a cancelled envelope any further."""
    row.attempt = {**row.attempt, **(attempt or {}), "cancel_requested": True}
    row.state, row.reason, row.hint = rules.CANCELLED, rules.CANCEL_REASON, rules.CANCEL_HINT
    row.writeback = {"accepted": False, "reason": rules.CANCEL_REASON}
    row.quota_spent = 0
    row.save(update_fields=["attempt", "state", "reason", "hint", "writeback", "quota_spent",
                            "updated_at"])


def cancel(goal_slug: str, agent_slug: str, key: str) -> GoalTurn:
    """Cancel the turn ``key`` (goals.core.turns.cancel_step decides). A turn whose session
    turn runs is interrupted through the session's own interrupt path (the host, via
    Redis) and stays ``running`` with ``attempt.cancel_requested`` until that turn has
    ended — then it ends ``cancelled``, so the agent's next turn never overlaps it. The
    request is durable on the envelope: a supervisor that dies meanwhile, or a replay,
    finishes the cancel; nothing resumes the attempt. Refused: 404 for an unknown key, 409
    for a settled or written turn. Cancelling again answers the same envelope."""
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)
        row = locks.for_update(agent.turns.filter(key=key)).first()
        if row is None:
            raise Refused(f"no turn {key!r}", code="not_found", status=404, field="key")
        session_turn = Turn.objects.filter(pk=row.session_turn_id).first()
        step = rules.cancel_step(
            row.state, cancel_requested=bool(row.attempt.get("cancel_requested")),
            attempt_running=session_turn is not None and session_turn.state not in ENDED)
        if step == "end":
            _end_cancelled(row)
        elif step == "interrupt":
            row.attempt = {**row.attempt, "cancel_requested": True}
            row.save(update_fields=["attempt", "updated_at"])
            enqueue(row.pk)  # the supervisor finishes it once the session turn ended
    if step == "interrupt":
        _interrupt(row, session_turn.pk)  # at once; the supervisor retries if too early
    return GoalTurn.objects.get(pk=row.pk)


# -------------------------------------------------------------------------- supervise
def set_autorun(goal_slug: str, agent_slug: str, autorun: bool) -> Agent:
    with transaction.atomic(durable=True):
        agent = locks.agent_of(goal_slug, agent_slug)
        if autorun and agent.mode != lc.MANAGED:
            raise Refused("only a managed agent runs by itself", code="wrong_mode",
                          field="autorun")
        agent.autorun = autorun
        agent.save(update_fields=["autorun"])
        if autorun:
            inbox_turns.send_supervisor(agent.pk)  # its first turn now, not at the beat
        return agent


def _overdue(dispatched_at, now) -> bool:
    return bool(dispatched_at) and now - dispatched_at > timedelta(seconds=attempt_timeout_s())


def supervise(agent_pk: int) -> GoalTurn | None:
    """Start the agent's next bounded turn when it may run by itself — unless its inbox
    comes first (goals/inbox_turns.py): then its lane is sent instead. The key follows
    from the last envelope, so two supervisors that race make one turn, not two."""
    agent = Agent.objects.select_related("goal").filter(pk=agent_pk).first()
    if agent is None:
        return None
    goal = agent.goal
    last = agent.turns.order_by("-id").first()
    step, _ = inbox_turns.next_step(agent)
    if step == inbox_rules.INBOX:
        # a reply due preempts ordinary advancement; an idle agent drains its inbox
        with transaction.atomic(durable=True):
            inbox_turns.schedule(agent.pk)
        return None
    if step != inbox_rules.TURN:
        return None
    try:
        turn, _ = request(goal.slug, agent.slug, key=f"auto-after-{last.pk if last else 0}")
    except Refused:
        return None  # the state moved since the look above: the next sweep asks again
    return turn
