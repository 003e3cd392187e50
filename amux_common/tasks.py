"""amux's one way to declare a Celery task, so every task is as durable as the rest:

- acknowledged late and rejected back to its queue when the worker process running it is
  lost, so a crash hands the message to another worker instead of losing it (every task
  is idempotent for that: a replay finds its work done);
- bounded in time (`time_limit`, with an optional softer limit that lets it tidy up);
- no result stored (nothing waits for one);
- on the queue the Celery app routes its name to (`default` unless amux_site/celery.py
  says otherwise), never a queue set on the task.

Tasks are sent by name with named arguments (`send_task(name, kwargs={...})`), so a caller
never imports the task's module and a message says what each value is."""

from __future__ import annotations

from celery import shared_task


def durable_task(name: str, *, time_limit: float, soft_time_limit: float | None = None):
    options = {"name": name, "acks_late": True, "reject_on_worker_lost": True,
               "ignore_result": True, "time_limit": time_limit}
    if soft_time_limit is not None:
        options["soft_time_limit"] = soft_time_limit
    return shared_task(**options)
