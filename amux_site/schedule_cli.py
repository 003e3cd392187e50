"""`manage.py amux schedule add|list|pause|resume|delete`: the REST commands of
sessions/schedules.py for an operator at the shell, acting as ``--user``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from sessions import schedules
from sessions.services import CommandError

FIELDS = ("name", "every_seconds", "cron", "mode", "prompt", "runtime", "model", "provider",
          "profile", "extra_args")


class CliError(Exception):
    pass


def _owner(name: str):
    user = get_user_model().objects.filter(username=name, is_active=True).first()
    if user is None:
        raise CliError(f"no active user {name!r} (--user)")
    return user


def run(action: str, options: dict[str, Any]) -> list[Any]:
    owner = _owner(options["user"])
    try:
        if action == "add":
            data = {k: options[k] for k in FIELDS if options.get(k) is not None}
            return [schedules.schedule_view(schedules.create_schedule(owner=owner, data=data))]
        if action == "list":
            return [schedules.schedule_view(s) for s in schedules.visible_to(owner)]
        if action == "delete":
            schedules.delete_schedule(owner=owner, schedule_id=options["id"])
            return [f"schedule {options['id']} deleted"]
        schedule = schedules.set_paused(owner=owner, schedule_id=options["id"],
                                        paused=action == "pause")
        return [schedules.schedule_view(schedule)]
    except CommandError as exc:
        where = f" ({exc.field})" if exc.field else ""
        raise CliError(f"{exc}{where}") from None
