"""`manage.py amux schedule add|list|pause|resume|delete`: the REST commands of
execution/schedules.py for an operator at the shell, acting as ``--user``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from execution import cli_input, schedules
from execution.schedules_api import CreateSchedule
from sessions.services import CommandError

FIELDS = ("name", "every_seconds", "cron", "mode", "prompt", "runtime", "model", "provider",
          "profile", "extra_args")


OWNER_DEFAULT = "admin"  # the operator account `amux run` creates


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
            data = cli_input.validated(CreateSchedule, cli_input.given(options, FIELDS))
            return [schedules.schedule_view(schedules.create_schedule(owner=owner, data=data))]
        if action == "list":
            return [schedules.schedule_view(s) for s in schedules.visible_to(owner)]
        if action == "delete":
            schedules.delete_schedule(owner=owner, schedule_id=options["id"])
            return [f"schedule {options['id']} deleted"]
        schedule = schedules.set_paused(owner=owner, schedule_id=options["id"],
                                        paused=action == "pause")
        return [schedules.schedule_view(schedule)]
    except cli_input.InputRefused as exc:
        raise CliError(str(exc)) from None
    except CommandError as exc:
        where = f" ({exc.field})" if exc.field else ""
        raise CliError(f"{exc}{where}") from None


def add_parser(sub) -> None:
    schedule = sub.add_parser(
        "schedule", help="prompts sent on a timer (see docs/sessions.md: Schedules)")
    actions = schedule.add_subparsers(dest="schedule_action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="define a schedule; prints it as JSON")
    # required as fields, checked with every other fault at once (or given in --json)
    add.add_argument("--name")
    cli_input.add_json_argument(add)
    timing = add.add_mutually_exclusive_group()
    timing.add_argument("--every", type=int, dest="every_seconds", metavar="SECONDS",
                        help="fire every SECONDS (at least 10)")
    timing.add_argument("--cron", help="five-field cron expression, UTC")
    add.add_argument("--mode", choices=["reuse-session", "new-session-per-run", "subtask"])
    add.add_argument("--prompt")
    add.add_argument("--runtime", help="kept for every firing (a subtask without one takes "
                                       "the default preset)")
    add.add_argument("--model")
    add.add_argument("--provider")
    add.add_argument("--profile", help="the expert (Agent Profile slug)")
    add.add_argument("--extra-arg", dest="extra_args", action="append", metavar="ARG",
                     help="a native argument for the runtime (repeatable)")
    add.add_argument("--user", default=OWNER_DEFAULT, help="the owner (default admin)")
    listing = actions.add_parser("list", help="the owner's schedules, one JSON line each")
    listing.add_argument("--user", default=OWNER_DEFAULT)
    for name in ("pause", "resume", "delete"):
        one = actions.add_parser(name, help=f"{name} one schedule")
        one.add_argument("id", type=int)
        one.add_argument("--user", default=OWNER_DEFAULT)
