"""`manage.py amux task submit --runtime R [--model M] [--profile P] PROMPT` (or
`--json FILE|-` with the body of `POST /api/v1/tasks/`): one task from the command line,
owned by ``--user`` (default ``admin``). Prints the task id; with ``--wait`` also its state
and the agent's answer once it has ended."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from execution import cli_input, task_runs
from execution.api_tasks import SubmitTask
from sessions.services import CommandError as Refused

DEFAULT_USER = "admin"


def add_parser(sub: Any) -> None:
    task = sub.add_parser("task", help="submit a task to an agent")
    task_sub = task.add_subparsers(dest="task_action", required=True, metavar="ACTION")
    submit = task_sub.add_parser("submit", help="submit a task; prints its id")
    submit.add_argument("prompt", nargs="?", help="what the agent is asked to do")
    cli_input.add_json_argument(submit)
    submit.add_argument("--runtime", help="codex, claude, pi, acp … (default: the default "
                                          "launch preset's)")
    submit.add_argument("--model", help="the model (default: the preset's)")
    submit.add_argument("--profile", help="the expert (an Agent Profile slug)")
    submit.add_argument("--provider", help="a provider slug")
    submit.add_argument("--permission-policy", dest="permission_policy",
                        help="policy-allow (default), policy-deny or bypass")
    submit.add_argument("--extra-arg", dest="extra_args", action="append", default=None,
                        help="a native command-line argument (repeatable)")
    submit.add_argument("--user", default=DEFAULT_USER, help="the owner (default admin)")
    submit.add_argument("--wait", action="store_true", help="wait and print the result")
    submit.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds --wait waits (default 3600)")


FIELDS = ("prompt", "runtime", "model", "profile", "provider", "permission_policy",
          "extra_args")


def submit(write, *, user=DEFAULT_USER, wait=False, timeout=3600.0, **options: Any) -> int:
    """Returns the exit code: 0 submitted (or succeeded), 1 refused or the task did not
    succeed, 2 still running at the timeout. Bad input raises cli_input.InputRefused."""
    data = cli_input.validated(SubmitTask, cli_input.given(options, FIELDS))
    owner = get_user_model().objects.filter(username=user, is_active=True).first()
    if owner is None:
        raise Refused(f"no active user {user!r}", field="user")
    run = task_runs.submit_task(owner=owner, **data)
    write(str(run.pk))
    if not wait:
        return 0
    run = task_runs.wait_for_result(run.pk, timeout)
    write(f"state: {run.state}")
    if run.state == "failed":
        write(f"error: {run.error_code} {run.error_message}".rstrip())
    if run.result:
        write(run.result)
    if run.state not in run.TERMINAL:
        return 2
    return 0 if run.state == "succeeded" else 1
