"""Each task reaches exactly the queue it is sent to (the `default` and `runtime` workers
of `amux run` must never both get one task)."""

import json
import uuid

import pytest
import redis
from django.conf import settings

from amux_site.celery import app


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    with app.connection_for_write() as conn:
        for queue in app.amqp.queues.values():
            queue(conn.default_channel).declare()  # what a worker does on start
    return client


def _where(client, task_id):
    found = {}
    for name in ("default", "runtime", "runtime.elsewhere"):
        for raw in client.lrange(name, 0, -1):
            if json.loads(raw)["headers"]["id"] == task_id:
                found[name] = found.get(name, 0) + 1
                client.lrem(name, 1, raw)
    return found


@pytest.mark.parametrize(("options", "queue"), [
    ({"queue": "runtime"}, "runtime"),
    ({"queue": "default"}, "default"),
    ({}, "default"),
    ({"queue": "runtime.elsewhere"}, "runtime.elsewhere"),
])
def test_a_task_lands_in_exactly_one_queue(broker, options, queue):
    task_id = uuid.uuid4().hex
    app.send_task("ops.probe", task_id=task_id, **options)
    assert _where(broker, task_id) == {queue: 1}
