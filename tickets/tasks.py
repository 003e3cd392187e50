"""Celery tasks of the orchestrator: thin interfaces that load by id and make one call.

The outbox's drain task lives with the outbox (effects/tasks.py)."""

from celery import shared_task

from tickets import intake, rejections, retention
from tickets.actions import guards


@shared_task(
    name="tickets.intake_sweep",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def intake_sweep() -> int:
    """Process stored deliveries left unprocessed (a crash after the answer), and keep the
    refused webhooks counted since the last sweep in their sources' health."""

    rejections.flush()
    return intake.process_pending()


@shared_task(
    name="tickets.poll_sources",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=240,
    time_limit=300,
    ignore_result=True,
)
def poll_sources() -> int:
    """Catch up on events missed while down (GitHub sources with polling on, comments on
    the documents a Lark source watches)."""

    return intake.poll_all()


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
