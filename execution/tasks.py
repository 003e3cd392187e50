"""Celery task of the execution model: beat's due check of the schedules (a run's firing is
an outbox effect, execution/schedules.py). Its name (``sessions.*``) is the one beat
already carries."""

from __future__ import annotations

from amux_common.tasks import durable_task
from execution import schedules


@durable_task("sessions.schedules_due", time_limit=60)
def schedules_due() -> int:
    """Beat's due check of the schedules (execution/schedules.py): one run per due slot."""
    return len(schedules.fire_due())

