"""amux's own validation of a goal's work: the goal's check_command in the session's work
directory, as the session's identity in its sandbox (what it runs was written by the
agent), with a clean environment, bounded in time, output capped
(sessions.session_commands). A managed turn's envelope (goals/turns.py) and an attached
agent's writeback (goals/writeback.py) both stand on it."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from goals.core import turns as rules
from sessions import session_commands


def check_timeout_s() -> int:
    return int(getattr(settings, "AMUX_GOAL_CHECK_TIMEOUT_S", 120))


def run(session, command: str) -> dict[str, Any]:
    """{"passed", "exit_code", "timed_out", "output"} of one run of ``command``."""
    done = session_commands.run_shell(session, command, timeout=check_timeout_s(),
                                      cap=rules.OUTPUT_CAP * 4)
    if done.error:  # the backend refused it, or the directory is not on this machine
        return {"passed": False, "exit_code": None, "timed_out": False,
                "output": rules.cap(f"the check could not run: {done.error}")}
    if done.timed_out:
        return {"passed": False, "exit_code": None, "timed_out": True,
                "output": rules.cap(done.output + f"\n[timed out after {check_timeout_s()} s]")}
    return {"passed": done.exit_code == 0, "exit_code": done.exit_code, "timed_out": False,
            "output": rules.cap(done.output)}
