"""Celery tasks of the orchestrator: thin interfaces that load by id and make one call.

The outbox's drain task lives with the outbox (effects/tasks.py), intake's sweep and
polls with intake (intake/tasks.py). What a cap holds needs no sweep: each held message,
input and dispatch is an outbox row due again when its cap resets."""


from amux_common.tasks import durable_task
from tickets import retention
from tickets.actions import main_routing


@durable_task("tickets.prune_history", time_limit=300, soft_time_limit=240)
def prune_history() -> int:
    """Drop timelines of long-ended tickets and old deliveries (AMUX_RETENTION_DAYS)."""
    return retention.prune().total


@durable_task("tickets.routing_sweep", time_limit=60, soft_time_limit=50)
def routing_sweep() -> int:
    """Requests whose notice never reached the main session take amux's own route."""
    return len(main_routing.unreached_routed_by_code())
