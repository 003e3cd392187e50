"""The caller tools, once: what a program holding an amux API token may start (seed 000's
``session_run``, ``task_run``, ``task_submit``, ``instance_spawn``, and ``task_get`` to read
a submitted task). MCP (execution/mcp_tools.py) only translates its transport to these.

Runtime, model and the expert (``profile``) are separate inputs, with ``extra_args`` for
the native runtime. A caller acts as its API user: it starts things only as an operator and
sees only what it owns (another caller's task or session is "not found"). Every function
is synchronous (Django ORM) and may block while it waits.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from amux_common import roles
from execution import direct_runs, instances, task_runs, turn_results
from execution.models import TaskRun
from sessions.models import Session
from sessions.services import CommandError

DEFAULT_WAIT_S = 600
MAX_WAIT_S = 3600
POLL_S = 0.25

DESCRIPTIONS = {
    "session_run": (
        "Run one prompt in an amux agent session and wait for the answer. Starts a new "
        "session on `runtime` (codex, claude, pi, acp …) with `model`, `provider` and the "
        "expert `profile` as given (each optional except runtime), plus native "
        "`extra_args`; or continues `session`, one you started before (it keeps its own "
        "settings). Returns the session id, the turn's state and the agent's final answer."
    ),
    "task_run": (
        "Give an agent a bounded task and wait for its result. A task runs in its own "
        "session (or on your persistent `instance`); `runtime`, `model`, `provider`, "
        "`profile` and `extra_args` are separate and optional: a task without a runtime "
        "uses amux's default launch preset. `permission_policy`: policy-allow (default), "
        "policy-deny or bypass. Returns the task with its state and result; if it is still "
        "running at `timeout_s`, call task_get with its id later."
    ),
    "task_submit": (
        "Submit a bounded task (the inputs of task_run) without waiting; returns its id at "
        "once. Read the outcome with task_get."
    ),
    "task_get": "Read one of your tasks: its state (queued, running, succeeded, failed, "
                "cancelled), result and frozen execution settings.",
    "instance_spawn": (
        "Create a persistent agent instance: a named agent that keeps its identity and its "
        "native conversation across tasks (give it tasks with task_run or task_submit and "
        "`instance`). Takes `runtime`, `model`, `provider`, the expert `profile` and "
        "`extra_args` separately; they are frozen for the instance's life."
    ),
}


def _operator(user) -> None:
    if not roles.is_operator(user):
        raise CommandError("only an operator's token may start sessions and tasks",
                           code="permission_denied", status=403)


def _wait_s(timeout_s: Any) -> float:
    if timeout_s is None:
        return DEFAULT_WAIT_S
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) \
            or not 0 <= timeout_s <= MAX_WAIT_S:
        raise CommandError(f"timeout_s is 0 to {MAX_WAIT_S} seconds", field="timeout_s")
    return float(timeout_s)


def task_view(run: TaskRun) -> dict[str, Any]:
    return {"task": run.pk, "state": run.state, "session": run.session_id,
            "instance": run.instance_id, "result": run.result or None,
            "error": ({"code": run.error_code, "message": run.error_message}
                      if run.error_code or run.error_message else None),
            "execution": run.execution, "ended": run.state in TaskRun.TERMINAL}


def _submit(user, prompt, runtime, model, provider, profile, extra_args, permission_policy,
            instance) -> TaskRun:
    _operator(user)
    return task_runs.submit_task(
        owner=user, prompt=prompt, profile=profile, runtime=runtime, model=model,
        provider=provider, extra_args=direct_runs.checked_args(extra_args),
        permission_policy=permission_policy, instance=instance)


def task_submit(user, *, prompt: str, runtime: str | None = None, model: str | None = None,
                provider: str | None = None, profile: str | None = None,
                extra_args: list[str] | None = None, permission_policy: str | None = None,
                instance: int | None = None) -> dict[str, Any]:
    return task_view(_submit(user, prompt, runtime, model, provider, profile, extra_args,
                             permission_policy, instance))


def task_run(user, *, prompt: str, runtime: str | None = None, model: str | None = None,
             provider: str | None = None, profile: str | None = None,
             extra_args: list[str] | None = None, permission_policy: str | None = None,
             instance: int | None = None, timeout_s: float | None = None) -> dict[str, Any]:
    wait = _wait_s(timeout_s)
    run = _submit(user, prompt, runtime, model, provider, profile, extra_args,
                  permission_policy, instance)
    return task_view(task_runs.wait_for_result(run.pk, wait))


def task_get(user, *, task: int) -> dict[str, Any]:
    run = task_runs.visible_to(user).filter(pk=task).first()
    if run is None:
        raise CommandError(f"no task {task} of yours", code="not_found", status=404,
                           field="task")
    return task_view(run)


def instance_spawn(user, *, name: str, runtime: str | None = None, model: str | None = None,
                   provider: str | None = None, profile: str | None = None,
                   extra_args: list[str] | None = None,
                   permission_policy: str | None = None) -> dict[str, Any]:
    _operator(user)
    agent = instances.create_instance(
        owner=user, name=name, profile=profile, runtime=runtime, model=model,
        provider=provider, extra_args=direct_runs.checked_args(extra_args),
        permission_policy=permission_policy)
    return {"instance": agent.pk, "name": agent.name, "session": agent.session_id,
            "profile": agent.profile.slug if agent.profile else None,
            "execution": (agent.session.snapshot or {}).get("execution")}


def session_run(user, *, prompt: str, runtime: str | None = None, model: str | None = None,
                provider: str | None = None, profile: str | None = None,
                extra_args: list[str] | None = None, session: int | None = None,
                timeout_s: float | None = None) -> dict[str, Any]:
    _operator(user)
    wait = _wait_s(timeout_s)
    key = f"mcp:{uuid.uuid4().hex}"
    target = direct_runs.prompt_posted(
        user, prompt=prompt, key=key, runtime=runtime, model=model, provider=provider,
        profile=profile, extra_args=extra_args, session=session)
    deadline = time.monotonic() + wait
    while True:
        found = turn_results.outcome(turn_results.turn_for_key(target, key))
        if found["state"] in turn_results.ENDED or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    execution = (Session.objects.get(pk=target).snapshot or {}).get("execution")
    return {"session": target, **found, "ended": found["state"] in turn_results.ENDED,
            "execution": execution}
