"""GET /healthz: the checks a load balancer or `amux status` relies on."""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from amux_site import heartbeat
from amux_site.version import version


def check_database() -> dict:
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "down"
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}


def check_redis() -> dict:
    started = time.monotonic()
    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2
        )
        client.ping()
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}


REQUIRED_CHECKS = {"database": check_database, "redis": check_redis}


def _optional_checks() -> dict:
    checks = {f"worker:{q}": (lambda q=q: heartbeat.queue_check(q))
              for q in heartbeat.EXPECTED_QUEUES}
    checks["beat"] = heartbeat.beat_check
    return checks


def run_checks() -> dict[str, dict]:
    """Required checks (a failure means 503), then informational ones (never 503)."""
    results = {name: {**check(), "required": True} for name, check in REQUIRED_CHECKS.items()}
    if results["redis"]["ok"]:
        for name, check in _optional_checks().items():
            results[name] = {**check(), "required": False}
    else:
        for name in _optional_checks():
            results[name] = {"ok": False, "error": "redis unavailable", "required": False}
    return results


@require_GET
def healthz(request):
    checks = run_checks()
    healthy = all(c["ok"] for c in checks.values() if c["required"])
    body = {"status": "ok" if healthy else "failing", "version": version(),
            "checks": checks}
    degraded = [name for name, c in checks.items() if not c["required"] and not c["ok"]]
    if healthy and degraded:
        body["degraded"] = degraded
    return JsonResponse(body, status=200 if healthy else 503)
