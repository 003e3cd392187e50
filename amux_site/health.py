"""GET /healthz: the checks a load balancer or `amux status` relies on."""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET


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


def run_checks() -> dict[str, dict]:
    return {name: check() for name, check in REQUIRED_CHECKS.items()}


@require_GET
def healthz(request):
    checks = run_checks()
    healthy = all(c["ok"] for c in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "failing", "checks": checks},
        status=200 if healthy else 503,
    )
