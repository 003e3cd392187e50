"""Commands amux runs in a session's work directory for another app (a goal's check): on
the machine that holds the directory, as the session's identity, in its sandbox, with a
clean environment and bounded time and output (runtimes.session_command)."""

from __future__ import annotations

from amux_common import aio
from runtimes import errors, session_command
from runtimes.session_command import CommandResult
from sessions import capacity, hosting, services
from sessions.models import Session


def home_queue(session: Session) -> str | None:
    """The runtime queue of the machine that last ran the session, where its work
    directory lives, when that is another machine with a live runtime worker; None: here
    (this machine ran it, or nobody else can)."""
    host = session.lease_host
    if not host or host == hosting.hostname() or not capacity.host_alive(host):
        return None
    return f"runtime.{host}"


def run_shell(session: Session, command: str, *, timeout: float, cap: int) -> CommandResult:
    """``command`` through ``/bin/sh -c`` in the session's work directory, under the
    isolation backend frozen in its snapshot (the runtime's own identity and sandbox)."""
    try:
        config = services.runtime_config(session, launch=False)
    except errors.RuntimeAdapterError as exc:
        return CommandResult(None, "", error=str(exc))
    if not session_command.workdir_exists(config):
        return CommandResult(None, "", error=f"the work directory {config.workdir} is not "
                                             f"on this machine ({hosting.hostname()})")
    # a fresh thread's loop: the caller may run one (a host, a test's browser)
    return aio.run(session_command.run(config, session_command.shell(command),
                                       timeout=timeout, cap=cap), name="amux-check")
