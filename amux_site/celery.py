"""The Celery application: Redis broker, two fixed queues (`default`, `runtime`), beat."""

import os

from celery import Celery, signals
from kombu import Queue

from amux_site import heartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")

app = Celery("amux")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("default"), Queue("runtime"))
# Every task has a fixed queue: session hosts own runtime processes on `runtime`, or on
# `runtime.<host>` for a session whose work directory lives on that host while its worker
# is alive (sessions/tasks.py enqueue_host); everything else runs on `default`. A runtime
# worker runs Celery's thread pool: one process, one thread per awake session.
app.conf.task_default_queue = "default"
app.conf.task_routes = {"sessions.host": {"queue": "runtime"}}
# The one beat schedule of every app.
app.conf.beat_schedule = {
    # expired session leases and sessions with input but no host (sessions/tasks.py)
    "sessions-sweep": {"task": "sessions.sweep", "schedule": 10.0, "options": {"expires": 10}},
    # schedules whose next slot has come (execution/schedules.py); slots are exact, a firing
    # is at most this late
    "schedules-due": {
        "task": "sessions.schedules_due", "schedule": 2.0, "options": {"expires": 2}
    },
    "outbox-sweep": {"task": "effects.drain_outbox", "schedule": 5.0, "options": {"expires": 5}},
    "intake-sweep": {"task": "intake.sweep", "schedule": 30.0, "options": {"expires": 30}},
    "source-poll": {"task": "intake.poll_sources", "schedule": 300.0, "options": {"expires": 300}},
    # requests whose notice to the main session is a dead letter (tickets/actions/main_routing)
    "routing-sweep": {
        "task": "tickets.routing_sweep", "schedule": 60.0, "options": {"expires": 60}
    },
    # bounded batches per run (tickets/retention.py); a no-op with AMUX_RETENTION_DAYS=0
    "history-prune": {
        "task": "tickets.prune_history", "schedule": 900.0, "options": {"expires": 900}
    },
    # managed goal agents set to autorun: their next turn when one is eligible (goals/tasks.py)
    "goals-supervise": {"task": "goals.supervise", "schedule": 15.0, "options": {"expires": 15}},
}
# Liveness for `/healthz`, `amux status` and `amux doctor` (see amux_site/heartbeat.py).
app.conf.beat_scheduler = "amux_site.heartbeat:HeartbeatScheduler"
app.steps["worker"].add(heartbeat.WorkerHeartbeat)
app.autodiscover_tasks()


@signals.worker_process_init.connect
def _fresh_database_connections(**kwargs):
    """A prefork child never touches the connections or pool its parent forked it with (see
    amux_site/db_pool.py); connected at import, so it runs before Celery's Django fixup."""
    from amux_site import db_pool

    db_pool.forget_inherited()


@signals.worker_process_init.connect
@signals.worker_ready.connect
def _freeze_loaded(**kwargs):
    """What the worker loaded (Django and every app) is set aside from later collections:
    in each prefork child, and in the worker's own process (the runtime worker's threads
    run there). Connected after _fresh_database_connections, so it runs after it."""
    from amux_site import gc_startup

    gc_startup.freeze_loaded()


@signals.celeryd_init.connect
def _descriptors(**kwargs):
    """A runtime worker holds a few descriptors per awake session (the runtime's pipes, a
    database and a Redis connection): take the hard limit, not the 1024 soft default."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@signals.setup_logging.connect
def _django_logging(**kwargs):
    """Workers and beat log through settings.LOGGING (its format and filters) instead of
    Celery's own handler."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
