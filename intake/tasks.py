"""Celery tasks of intake: thin interfaces, each one call."""


from amux_common.tasks import durable_task
from intake import poll, process, profile, rejections
from intake.models import Source


@durable_task("intake.drain", time_limit=process.DRAIN_SECONDS + 90,
              soft_time_limit=process.DRAIN_SECONDS + 60)
def intake_drain() -> int:
    """Process the deliveries webhooks stored (woken right after each commit)."""
    return process.drain()


@durable_task("intake.sweep", time_limit=180, soft_time_limit=120)
def intake_sweep() -> int:
    """Process stored deliveries left unprocessed (a crash after the answer, a lost
    wake-up; a failed one's mailbox is its outbox retry's), and keep the refused webhooks
    counted since the last sweep in their sources' health."""
    rejections.flush()
    return process.process_pending()


@durable_task("intake.poll_sources", time_limit=300, soft_time_limit=240)
def poll_sources() -> int:
    """Catch up on events missed while down (GitHub sources with polling on, comments on
    the documents a Lark source watches, the history of its chats), and check each Lark
    source's bot against the bot's identity as Lark states it."""
    profile.verify_all()
    return poll.poll_all()


@durable_task("intake.poll_source", time_limit=300, soft_time_limit=240)
def poll_source(source_id: int) -> int:
    """Poll one source now (asked for when an event needs its polled copy)."""
    source = Source.objects.filter(pk=source_id, enabled=True).first()
    return poll.poll(source) if source is not None else 0
