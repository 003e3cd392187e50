"""Celery task of the policy: the sweep that applies a saved version's effects if the call
after its commit was lost (a crash, a failed listener)."""


from amux_common.tasks import durable_task
from policy import services


@durable_task("policy.apply_pending", time_limit=180, soft_time_limit=120)
def apply_pending() -> None:
    services.apply_pending()
