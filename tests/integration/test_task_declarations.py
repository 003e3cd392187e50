"""Every Celery task of amux is declared one way (amux_common/tasks.py, issue 31 item 3):
acknowledged late, given back to its queue when its worker is lost, bounded in time, no
result stored, no queue of its own; and every task beat sends exists."""

from __future__ import annotations

from amux_site.celery import app

APPS = ("effects.", "goals.", "intake.", "policy.", "sessions.", "tickets.")


def amux_tasks():
    app.loader.import_default_modules()  # the apps' tasks modules, as a worker loads them
    return {name: task for name, task in app.tasks.items() if name.startswith(APPS)}


def test_every_task_is_durable_and_bounded():
    tasks = amux_tasks()
    assert {"effects.drain_outbox", "intake.drain", "goals.turn", "sessions.host",
            "tickets.routing_sweep", "sessions.schedules_due"} <= set(tasks)
    for name, task in tasks.items():
        assert (task.acks_late, task.reject_on_worker_lost, task.ignore_result) == (
            True, True, True), name
        assert task.time_limit and task.time_limit > 0, name
        assert getattr(task, "queue", None) is None, f"{name} sets a queue of its own"


def test_beat_sends_only_tasks_that_exist():
    tasks = amux_tasks()
    for entry in app.conf.beat_schedule.values():
        assert entry["task"] in tasks, entry["task"]
