"""Persistent Agent Instances: one named agent that keeps its identity and its native
conversation across tasks. An instance owns exactly one session, created with it; each task
given to it is one more turn of that session (execution/task_runs.py), so a task posted while
another runs waits in the session's queue (state ``queued``) and runs after it, and a
sleeping session is woken by the next task and resumes the same native conversation.

Only amux creates instances (this module is their one writer, one durable transaction per
command): a native agent's own sub-agents stay inside its turn."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from execution import launch, profiles
from execution.core.launch_rules import TASK, CallerSettings
from execution.models import AgentInstance
from sessions import ownership, services
from sessions.new_session import Launch, Prompting, SessionSpec
from sessions.services import CommandError, Conflict

MAX_NAME = 120


def visible_to(user):
    return AgentInstance.objects.filter(owner=user)


def create_instance(*, owner, name: str, profile: str | None = None,
                    runtime: str | None = None, model: str | None = None,
                    provider: str | None = None, extra_args: list[str] | None = None,
                    permission_policy: str | None = None) -> AgentInstance:
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_NAME:
        raise CommandError(f"name is 1 to {MAX_NAME} characters", field="name")
    name = name.strip()
    if AgentInstance.objects.filter(owner=owner, name=name).exists():
        raise Conflict(f"you have an instance named {name!r} already", code="exists",
                       field="name")
    expert = profiles.get_profile(profile)
    settings = launch.resolve(TASK, CallerSettings(
        runtime=runtime, model=model, provider=provider, permission_policy=permission_policy,
        extra_args=tuple(extra_args) if extra_args is not None else None))
    try:
        with transaction.atomic(durable=True):
            session = services.create_session(
                Launch(settings), Prompting(profile=expert.slug if expert else None),
                # the label must fit the session's name column (120) whatever the name's length
                SessionSpec(name=f"instance {name}"[:120],
                            scope=ownership.of_caller("instance", owner)))
            return AgentInstance.objects.create(owner=owner, name=name, profile=expert,
                                                session=session)
    except IntegrityError as exc:
        raise Conflict(f"you have an instance named {name!r} already", code="exists",
                       field="name") from exc
