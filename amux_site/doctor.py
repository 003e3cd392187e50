"""`manage.py amux doctor`: the built-in checks plus every app's `<app>/doctor.py`.

The registry imports `<app>.doctor` for each installed app (when that module exists) and
calls its `checks()`, which yields `amux_common.doctor.Check` objects. A check that raises
becomes a failed required check naming the exception, so one broken plug-in never hides
the others.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable, Iterator

from django.apps import apps
from django.db import connection

from amux_common.doctor import Check
from amux_site import health, heartbeat


def _describe(result: dict, fallback: str = "") -> str:
    if result.get("ok"):
        if "ms" in result:
            return f"{result['ms']} ms"
        if "workers" in result:
            return ", ".join(result["workers"])
        if "age_s" in result:
            return f"last tick {result['age_s']} s ago"
        return fallback
    return result.get("error", "failed")


def core_checks() -> Iterator[Check]:
    db = health.check_database()
    yield Check("database", db["ok"], f"{connection.vendor}, {_describe(db)}")
    from django.conf import settings

    r = health.check_redis()
    where = "embedded" if getattr(settings, "REDIS_EMBEDDED", False) else "REDIS_URL"
    detail = _describe(r)
    if not r["ok"] and where == "embedded":
        detail += " (the embedded Redis runs only while `amux run` does)"
    yield Check("redis", r["ok"], f"{where}, {detail}")
    for queue in heartbeat.EXPECTED_QUEUES:
        result = heartbeat.queue_check(queue) if r["ok"] else {"ok": False,
                                                                "error": "redis unavailable"}
        yield Check(f"worker:{queue}", result["ok"], _describe(result))
    result = heartbeat.beat_check() if r["ok"] else {"ok": False, "error": "redis unavailable"}
    yield Check("beat", result["ok"], _describe(result))


def app_modules() -> list[str]:
    """`<app>.doctor` for every installed app that has one."""
    found = []
    for config in apps.get_app_configs():
        name = f"{config.name}.doctor"
        if config.name == "amux_site":
            continue
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except ModuleNotFoundError:
            continue
    return found


def plugin_checks(modules: Iterable[str]) -> Iterator[Check]:
    for name in modules:
        try:
            module = importlib.import_module(name)
            results = list(module.checks())
        except Exception as exc:
            yield Check(name, False, f"checks() failed: {type(exc).__name__}: {exc}")
            continue
        for result in results:
            if isinstance(result, Check):
                yield result
            else:
                yield Check(name, False, f"checks() yielded {type(result).__name__}, not Check")


def run(modules: Iterable[str] | None = None) -> list[Check]:
    return [*core_checks(), *plugin_checks(app_modules() if modules is None else modules)]


def format_line(check: Check) -> str:
    mark = "ok  " if check.ok else ("FAIL" if check.required else "warn")
    return f"{mark}  {check.name:<24} {check.detail}".rstrip()
