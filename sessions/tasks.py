"""Celery tasks of the session layer: the session host (``runtime`` queue) and the sweep.

Correctness never rests on broker redelivery: a redelivered or duplicate host task finds
the lease held and returns at once; a dead host's lease expires and the sweep starts a new
host, which resumes the same native session.
"""

from __future__ import annotations

import asyncio
import logging
import os

from celery import signals
from django.db.models import Q
from django.utils import timezone

from amux_common.tasks import durable_task
from sessions import schedules
from sessions.host import SessionHost
from sessions.hosting import HOST_TASK, enqueue_host, hostname
from sessions.models import Lifecycle, Session, TurnState

log = logging.getLogger(__name__)

HOST_TIME_LIMIT = 8 * 24 * 3600  # beyond the 7-day turn cap


@durable_task(HOST_TASK, time_limit=HOST_TIME_LIMIT)
def run_session_host(*, session_id: int) -> str:
    outcome = asyncio.run(SessionHost(session_id).run())
    log.info("session %s host ended: %s", session_id, outcome)
    return outcome


@durable_task("sessions.sweep", time_limit=60)
def sweep_sessions() -> int:
    """Start a host for every session whose host died (expired lease) or whose queued input
    found no host (asleep with work waiting)."""
    now = timezone.now()
    expired = Q(lifecycle__in=[Lifecycle.RUNNING, Lifecycle.IDLE]) & (
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True))
    waiting = Q(turns__state=TurnState.QUEUED) & ~Q(lifecycle=Lifecycle.ARCHIVED) & (
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True))
    found = list(Session.objects.filter(expired | waiting)
                 .values_list("pk", "lease_host").distinct())
    # one host task on its way per session: a full machine does not pile them up
    return sum(enqueue_host(session_id, host, once=True) for session_id, host in found)


def _owner_dead_here(owner: str, host: str) -> bool:
    """The lease owner (``<host>:<pid>:<nonce>``, sessions/host.py) was a process of this
    machine that no longer runs."""
    parts = owner.split(":")
    if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def reclaim_dead_leases(host: str) -> int:
    """A runtime worker that starts takes back at once the sessions whose host died on
    this machine (its process is gone, so it cannot be renewing): they are resumed now
    instead of when their lease expires. A lease whose owner may still run is left alone."""
    now = timezone.now()
    taken = 0
    for pk, owner in Session.objects.filter(lease_host=host, lease_expires_at__gt=now) \
            .exclude(lease_owner="").values_list("pk", "lease_owner"):
        if _owner_dead_here(owner, host) and Session.objects.filter(
                pk=pk, lease_owner=owner).update(lease_expires_at=now) == 1:
            taken += enqueue_host(pk, host)
    return taken


@signals.worker_ready.connect
def _reclaim_on_start(sender=None, **kwargs) -> None:

    try:
        queues = set(sender.app.amqp.queues.consume_from)
    except AttributeError:
        return
    if "runtime" in queues or any(q.startswith("runtime.") for q in queues):
        try:
            taken = reclaim_dead_leases(hostname())
        except Exception:  # never keep the worker from starting; the sweep still runs
            log.warning("dead hosts' sessions not reclaimed at start", exc_info=True)
            return
        if taken:
            log.info("resuming %s session(s) whose host died on this machine", taken)


@durable_task("sessions.schedules_due", time_limit=60)
def schedules_due() -> int:
    """Beat's due check of the schedules (sessions/schedules.py): one run per due slot."""
    return len(schedules.fire_due())


@durable_task(schedules.FIRE_TASK, time_limit=120)
def fire_schedule_run(*, run_id: int) -> None:
    """Set one schedule run going; a duplicate or retried message finds it started."""
    schedules.fire(run_id)
