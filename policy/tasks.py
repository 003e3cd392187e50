"""Celery task of the policy: the sweep that applies a saved version's effects if the call
after its commit was lost (a crash, a failed listener)."""

from celery import shared_task

from policy import services


@shared_task(
    name="policy.apply_pending",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def apply_pending() -> None:
    services.apply_pending()
