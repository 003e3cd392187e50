"""The Celery workers alive now, as their heartbeats in Redis say (written by
amux_site/heartbeat.py): `amux:heartbeat:worker:<nodename>` → {"hostname", "queues", "pid",
"slots", "at"}, expiring TTL seconds after the last write. Read by `/healthz`, `amux status`,
`amux doctor` and the session layer (how many sessions the runtime workers hold at once)."""

from __future__ import annotations

import json

import redis

PREFIX = "amux:heartbeat:"
WORKER_PREFIX = PREFIX + "worker:"
TTL = 20


def workers(client: redis.Redis) -> list[dict]:
    """Every worker that has written a heartbeat within TTL seconds."""
    keys = sorted(client.scan_iter(match=WORKER_PREFIX + "*", count=100))
    found = []
    for raw in client.mget(keys) if keys else []:
        if raw is None:
            continue
        try:
            found.append(json.loads(raw))
        except ValueError:
            continue
    return found
