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
from sessions import actions, identities, warm_pool
from sessions import isolation as session_isolation
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
        if _owner_dead_here(owner, host) and actions.lease_reclaimed(pk, owner):
            taken += enqueue_host(pk, host)
    return taken


@signals.worker_ready.connect
def runtime_user_ahead(sender=None, **kwargs) -> None:
    """Every worker, as it starts, where sessions run as users of their own (linux-dac,
    bwrap): the user the next lease takes is made now, outside any transaction, so that
    even the first lease on this machine, made inside a caller's transaction (a ticket's
    dispatch, a conversation's start), only looks its user up."""
    try:
        if session_isolation.uses_principal():
            identities.provision_ahead()
    except Exception:  # never keep the worker from starting; the lease says what is wrong
        log.warning("the next runtime user was not made at start", exc_info=True)


@signals.worker_ready.connect
def _reclaim_on_start(sender=None, **kwargs) -> None:

    try:
        queues = set(sender.app.amqp.queues.consume_from)
    except AttributeError:
        return
    if "runtime" in queues or any(q.startswith("runtime.") for q in queues):
        try:  # the runtime users a dead worker's warm pool held go back
            warm_pool.release_dead_holders()
        except Exception:
            log.warning("dead warm pools' runtime users not released", exc_info=True)
        try:
            taken = reclaim_dead_leases(hostname())
        except Exception:  # never keep the worker from starting; the sweep still runs
            log.warning("dead hosts' sessions not reclaimed at start", exc_info=True)
            return
        if taken:
            log.info("resuming %s session(s) whose host died on this machine", taken)


@signals.worker_shutdown.connect
def _stop_warm_pool(**kwargs) -> None:
    """A stopping runtime worker stops the idle runtimes it kept warm and frees their
    slots (sessions/warm_pool.py)."""
    warm_pool.POOL.stop()
