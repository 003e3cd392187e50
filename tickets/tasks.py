"""Celery tasks of the orchestrator: thin interfaces that load by id and make one call."""

from celery import shared_task

from tickets import outbox


@shared_task(
    name="tickets.drain_outbox",
    acks_late=True,
    reject_on_worker_lost=True,
    # The hard limit stays below half of the shortest lease (outbox.KINDS), so a handler
    # killed by it can never outlive its lease and overlap a second run of the same effect.
    soft_time_limit=120,
    time_limit=140,
    ignore_result=True,
)
def drain_outbox() -> int:
    """Kicked after each commit that wrote effects, and swept every 5 s by beat."""
    outbox.woke()
    return outbox.drain(seconds=60)


@shared_task(
    name="tickets.intake_sweep",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def intake_sweep() -> int:
    """Process stored deliveries left unprocessed (a crash after the answer)."""
    from tickets import intake

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
    from tickets import intake

    return intake.poll_all()


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
    from tickets import retention

    return retention.prune().total
