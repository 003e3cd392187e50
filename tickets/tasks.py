"""Celery tasks of the orchestrator: thin interfaces that load by id and make one call."""

from celery import shared_task

from tickets import outbox


@shared_task(
    name="tickets.drain_outbox",
    queue="default",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def drain_outbox() -> int:
    return outbox.drain(seconds=60)
