"""Where a session's host runs: this machine's name, the host task sent to the machine that
holds the session's work directory, and the wake-up of a session's host. The task is sent
by name (sessions.host, in sessions/tasks.py), so the commands that wake a session never
import the task module above them."""

from __future__ import annotations

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions import capacity, control
from sessions.models import Lifecycle, Session

HOST_TASK = "sessions.host"


def hostname() -> str:
    """This machine's name in leases and in its own runtime queue (``runtime.<name>``)."""
    return settings.AMUX_HOSTNAME


def enqueue_host(session_id: int, host: str = "", *, once: bool = False) -> bool:
    """Send the session's host task to ``runtime.<host>`` (the machine that holds its work
    directory) while a worker there is alive, else to any runtime worker. ``once``: not if
    a task is already on its way (the sweep); False when none was sent."""
    pinned = bool(host) and capacity.host_alive(host)
    # a pinned task is looked at again soon: its host may have died since its heartbeat
    ttl = capacity.PINNED_WAKE_TTL if pinned else capacity.WAKE_TTL
    if not capacity.mark_wake(session_id, ttl=ttl, replace=not once):
        return False
    current_app.send_task(HOST_TASK, kwargs={"session_id": session_id},
                          queue=f"runtime.{host}" if pinned else "runtime")
    return True


def lease_seconds() -> int:
    """The host lease's time to live (renewed every third of it)."""
    return int(settings.AMUX_SESSION_LEASE_SECONDS)


def lease_alive(session: Session) -> bool:
    return bool(session.lease_owner and session.lease_expires_at
                and session.lease_expires_at > timezone.now())


def wake(session_id: int, session: Session | None = None) -> None:
    """Make sure a host serves the session: nudge a live one or enqueue a new one
    (``session``: the row as the caller read it in this transaction)."""
    session = session or Session.objects.get(pk=session_id)
    if session.lifecycle == Lifecycle.ARCHIVED:
        return
    if lease_alive(session):
        # after commit, or the host could look before the new turn is visible
        transaction.on_commit(lambda: control.send(session_id, "input"))
        return
    host = session.lease_host  # the machine that last ran it holds its work directory
    transaction.on_commit(lambda: enqueue_host(session_id, host))
