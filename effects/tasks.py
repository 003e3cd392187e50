"""The drain task: kicked after each commit that wrote effects, swept every 5 s by beat."""

from django.conf import settings

from amux_common.tasks import durable_task
from effects import outbox

# The hard limit bounds every handler; start-up checks it stays under half the shortest
# lease (outbox.check_lease_rule), so a handler killed by it never outlives its lease.
# The soft limit leaves a handler interrupted by it time to settle its row, and the drain
# loop stops claiming well before either.
TIME_LIMIT = settings.AMUX_OUTBOX_TASK_TIME_LIMIT
SOFT_TIME_LIMIT = TIME_LIMIT * 6 / 7
DRAIN_SECONDS = TIME_LIMIT * 3 / 7


@durable_task(outbox.DRAIN_TASK, time_limit=TIME_LIMIT, soft_time_limit=SOFT_TIME_LIMIT)
def drain_outbox() -> int:
    outbox.woke()
    return outbox.drain(seconds=DRAIN_SECONDS)


@durable_task("tickets.drain_outbox", time_limit=TIME_LIMIT,
              soft_time_limit=SOFT_TIME_LIMIT)
def drain_outbox_under_its_old_name() -> int:
    """Runs kicks and sweeps queued under the name the task had before the outbox left
    `tickets` (a broker that outlived an upgrade still holds some). Nothing sends it."""
    return drain_outbox()
