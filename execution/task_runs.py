"""Task runs: one task given to an agent, carried out as one turn of a session. This module
is their only writer.

API (stable; other apps and the MCP caller tools build on it):
``submit_task(*, owner, prompt, profile=None, runtime=None, model=None, provider=None,
extra_args=None, permission_policy=None, instance=None) -> TaskRun`` resolves the execution
settings (execution/launch.py: explicit arguments win, a task that names no runtime takes
the distribution default preset's runtime and model, permissions follow
``permission_policy``, default ``policy-allow``), creates the task's own child session
(or, with ``instance`` — an AgentInstance or its id, owned by ``owner`` — reuses that
instance's session and its frozen settings), posts ``prompt`` as the session's next turn,
commits and returns the TaskRun; the session host runs the turn. It raises
``sessions.services.CommandError`` (``.status``, ``.code``, ``.field``) for bad input and
writes nothing then. ``wait_for_result(task_run_id, timeout_s) -> TaskRun`` returns the run
once it has ended (``state`` in ``TaskRun.TERMINAL``: ``succeeded``/``failed``/``cancelled``,
``result`` the agent's final answer) or, at the timeout, as it is then (``queued`` or
``running``). A writer that gives a task as part of its own command (a schedule's firing)
calls ``task_given`` in its transaction instead. ``visible_to(user)`` is the queryset a
caller may read (its own runs).
The state follows the turn: ``running`` is written with the turn's start, the outcome when
the ``session.turn_ended`` fact reaches this module's subscriber (``tasks``; a continuation
after a lost host keeps the run going).
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction
from django.utils import timezone

from execution import launch, locks, profiles
from execution.core.launch_rules import TASK, CallerSettings
from execution.models import AgentInstance, TaskRun, TaskRunState
from sessions import actions as session_actions
from sessions import limits, ownership, services
from sessions.core.turns import RESUME_SUFFIX, base_key
from sessions.models import TimelineEvent, Turn, TurnState
from sessions.new_session import Launch, Prompting, SessionSpec
from sessions.services import CommandError

SUBSCRIBER = "tasks"  # of session.turn_ended, for sessions that have task runs
MAX_PROMPT = limits.PROMPT
TASK_IDLE_TIMEOUT = 0  # a task's own session sleeps once its turn has settled
OUTCOME = {TurnState.COMPLETED: TaskRunState.SUCCEEDED, TurnState.FAILED: TaskRunState.FAILED,
           TurnState.CANCELLED: TaskRunState.CANCELLED}


def visible_to(user) -> Any:
    return TaskRun.objects.filter(owner=user)


def _check_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise CommandError("prompt must be a non-empty string", field="prompt")
    if len(prompt) > MAX_PROMPT:
        raise CommandError(f"prompt is longer than {MAX_PROMPT} characters", field="prompt")
    return prompt


def _instance_of(owner, instance) -> AgentInstance:
    pk = instance.pk if isinstance(instance, AgentInstance) else instance
    found = locks.instance(owner, pk)
    if found is None:
        raise CommandError(f"no instance {pk!r} of yours", code="not_found", status=404,
                           field="instance")
    return found


def submit_task(**task: Any) -> TaskRun:
    """One task given, in a durable transaction of its own (the arguments: ``task_given``'s,
    as this module's docstring says)."""
    with transaction.atomic(durable=True):
        return task_given(**task)


def task_given(*, owner, prompt: str, profile: str | None = None,
               runtime: str | None = None, model: str | None = None,
               provider: str | None = None, extra_args: list[str] | None = None,
               permission_policy: str | None = None,
               instance: AgentInstance | int | None = None) -> TaskRun:
    """``submit_task`` in its caller's transaction: for a writer that gives a task as part
    of its own command (a schedule's firing), under its own earlier locks."""
    prompt = _check_prompt(prompt)
    if instance is not None:
        given = {"runtime": runtime, "model": model, "provider": provider,
                 "extra_args": extra_args, "permission_policy": permission_policy,
                 "profile": profile}
        for key, value in given.items():
            if value is not None:
                raise CommandError(f"an instance runs with the {key} it was created with",
                                   field=key)
        agent = _instance_of(owner, instance)
        session, expert = agent.session, agent.profile
    else:
        agent = None
        expert = profiles.get_profile(profile)
        settings = launch.resolve(TASK, CallerSettings(
            runtime=runtime, model=model, provider=provider,
            permission_policy=permission_policy,
            extra_args=tuple(extra_args) if extra_args is not None else None))
        session = services.create_session(
            Launch(settings), Prompting(profile=expert.slug if expert else None),
            SessionSpec(name="task", idle_timeout_s=TASK_IDLE_TIMEOUT,
                        scope=ownership.of_caller("task", owner),
                        # a task's own child session: the restricted entry, no session or
                        # schedule tools (seed 000); its memory tools stay
                        role="task"))
    run = TaskRun.objects.create(
        owner=owner, prompt=prompt, profile=expert, instance=agent, session=session,
        execution=dict((session.snapshot or {}).get("execution") or {}))
    session_actions.task_run_given(session, None if agent else f"task {run.pk}")
    run.turn_key = f"task:{run.pk}"
    run.save(update_fields=["turn_key"])
    services.post_message(session.pk, prompt, key=run.turn_key)
    return run


def wait_for_result(task_run_id: int, timeout_s: float) -> TaskRun:
    """Block until the run has ended or ``timeout_s`` passed (the effect that settles it is
    durable; this only watches the row)."""
    deadline = time.monotonic() + max(0.0, float(timeout_s))
    while True:
        run = TaskRun.objects.get(pk=task_run_id)
        if run.state in TaskRun.TERMINAL or time.monotonic() >= deadline:
            return run
        time.sleep(min(0.25, max(0.01, deadline - time.monotonic())))


# ------------------------------------------------------------ the end of a task's turn
def wants_turn_end(fact: dict) -> bool:
    """Only a session that has task runs needs its turn ends settled here."""
    return bool(fact.get("task_runs"))


def final_answer(turn_id: int) -> str:
    """The agent's last complete message of the turn."""
    texts = (TimelineEvent.objects.filter(turn_id=turn_id, type="message.completed")
             .order_by("-seq").values_list("payload", flat=True))
    for payload in texts:
        text = (payload or {}).get("text")
        if isinstance(text, str) and text.strip():
            return text
    return ""


def _failure(turn_id: int) -> str:
    payload = (TimelineEvent.objects.filter(turn_id=turn_id, type="turn.failed")
               .values_list("payload", flat=True).first()) or {}
    message = payload.get("message") or ""
    return message if isinstance(message, str) else str(message)


def turn_started(session_id: int, turn_key: str) -> None:
    """The turn carrying a task run has started (sessions.hooks.task_turn_started): a fact
    told inside the timeline's transaction, under the session's lock, so it writes there.
    One conditional UPDATE: it takes the run's row lock itself, on the turn's hot path."""
    TaskRun.objects.filter(session_id=session_id, turn_key=turn_key,
                           state=TaskRunState.QUEUED).update(
        state=TaskRunState.RUNNING, started_at=timezone.now())


def turn_ended(effect_id: int, payload: dict) -> None:
    """The ``tasks`` subscriber of ``session.turn_ended`` (idempotent): the run takes the
    turn's outcome (its messages are all stored by then)."""
    turn = Turn.objects.filter(pk=payload.get("turn")).first()
    if turn is None or turn.state not in OUTCOME:
        return
    if turn.state == TurnState.CANCELLED and Turn.objects.filter(
            session_id=turn.session_id, key=turn.key + RESUME_SUFFIX).exists():
        return  # the host was lost mid-turn: the continuation carries the task on
    with transaction.atomic(durable=True):
        run = locks.task_run_of_turn(turn.session_id, base_key(turn.key))
        if run is None or run.state in TaskRun.TERMINAL:
            return
        run.state = OUTCOME[TurnState(turn.state)]
        run.result = final_answer(turn.pk)
        run.error_code = turn.error_code or ""
        run.error_message = _failure(turn.pk) if turn.state == TurnState.FAILED else ""
        run.started_at = run.started_at or turn.started_at
        run.ended_at = turn.ended_at or timezone.now()
        run.save(update_fields=["state", "result", "error_code", "error_message",
                                "started_at", "ended_at"])
