"""A caller's prompt run directly in a session (the ``session_run`` caller tool): a new
session on the runtime it names, or one of its own it continues, with the prompt as that
session's next turn — one durable transaction; the host is woken once it has committed."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessions import ownership, services
from sessions.models import Session
from sessions.new_session import Launch, Prompting, SessionSpec
from sessions.refusals import CommandError


def prompt_posted(owner, *, prompt: str, key: str, runtime: str | None = None,
                  model: str | None = None, provider: str | None = None,
                  profile: str | None = None, extra_args: Any = None,
                  session: int | None = None) -> int:
    """Posts ``prompt`` under ``key`` (how the caller finds its turn); returns the
    session's id."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise CommandError("prompt must be a non-empty string", field="prompt")
    if session is not None:
        given = {"runtime": runtime, "model": model, "provider": provider,
                 "profile": profile, "extra_args": extra_args}
        for field, value in given.items():
            if value is not None:
                raise CommandError(f"a session keeps the {field} it was started with",
                                   field=field)
    elif not runtime:
        raise CommandError("runtime is required to start a session (codex, claude, pi, "
                           "acp …)", field="runtime")
    with transaction.atomic(durable=True):
        target = _continued(owner, session) if session is not None else _started(
            owner, runtime=runtime, model=model, provider=provider, profile=profile,
            extra_args=checked_args(extra_args))
        services.post_message(target, prompt, key=key)
    return target


def checked_args(value: Any) -> list[str] | None:
    """A caller's ``extra_args`` (the caller tools take them as JSON)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise CommandError("extra_args must be a list of strings", field="extra_args")
    return value


def _continued(owner, session_id: int) -> int:
    if not Session.objects.filter(pk=session_id, owner=owner).exists():
        raise CommandError(f"no session {session_id} of yours", code="not_found", status=404,
                           field="session")
    return session_id


def _started(owner, *, profile: str | None, **settings: Any) -> int:
    return services.create_session(
        Launch.direct(**settings), Prompting(profile=profile),
        SessionSpec(name="session_run", scope=ownership.of_caller("direct", owner))).pk
