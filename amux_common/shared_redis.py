"""One Redis connection pool per process for amux's own keys (session control, intake
counters): made on first use, so a Celery child forked from its parent never shares its
parent's sockets."""

from __future__ import annotations

import redis
from django.conf import settings

_client: redis.Redis | None = None


def client() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5,
                                       socket_connect_timeout=5)
    return _client
