"""Celery tasks of the orchestrator: thin interfaces that load by id and make one call.

The outbox's drain task lives with the outbox (effects/tasks.py), intake's sweep and
polls with intake (intake/tasks.py)."""

from celery import shared_task

from tickets import retention
from tickets.actions import guards


@shared_task(
    name="tickets.guards_sweep",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=50,
    time_limit=60,
    ignore_result=True,
)
def guards_sweep() -> int:
    """When an hour or a day rolls over, what a cap held goes out (in order)."""
    return len(guards.guards_rechecked())


@shared_task(
    name="tickets.prune_history",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=240,
    time_limit=300,
    ignore_result=True,
)
def prune_history() -> int:
    """Drop timelines of long-ended tickets and old deliveries (AMUX_RETENTION_DAYS)."""
    return retention.prune().total
