"""Imported by the test's Celery worker (`-I tests.e2e.outbox_worker_handlers`): a `deliver`
handler, in place of the app's own, that records each handled effect in Redis under
AMUX_TEST_PREFIX."""

import json
import os

import django

django.setup()

import redis  # noqa: E402
from django.conf import settings  # noqa: E402

from effects import outbox  # noqa: E402

_client = redis.Redis.from_url(settings.REDIS_URL)
_prefix = os.environ["AMUX_TEST_PREFIX"]


@outbox.register("deliver", replace=True)
def handle(effect_id: int, payload: dict) -> None:
    _client.hset(f"{_prefix}:handled", effect_id, json.dumps(payload))
