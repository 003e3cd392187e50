"""`manage.py amux doctor`: the built-in checks plus every app's `<app>/doctor.py`.

The registry imports `<app>.doctor` for each installed app (when that module exists) and
calls its `checks()`, which yields `amux_common.doctor.Check` or `Probe` objects. Every
check runs on its own: a probe (or built-in check) that raises becomes that check's failing
line naming the exception, and an app whose `checks()` itself raises keeps the lines it
yielded before and gets one failing line, so one failure never hides the others.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable, Iterator

from django.apps import apps
from django.db import connection

from amux_common.doctor import Check, Probe
from amux_site import health, heartbeat, runtimes_install


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


def _database() -> Check:
    db = health.check_database()
    return Check("database", db["ok"], f"{connection.vendor}, {_describe(db)}")


def _redis() -> Check:
    from django.conf import settings

    r = health.check_redis()
    where = "embedded" if getattr(settings, "REDIS_EMBEDDED", False) else "REDIS_URL"
    detail = _describe(r)
    if not r["ok"] and where == "embedded":
        detail += " (the embedded Redis runs only while `amux run` does)"
    return Check("redis", r["ok"], f"{where}, {detail}")


def _needs_redis(name: str, check) -> Check:
    result = check() if health.check_redis()["ok"] else {"ok": False,
                                                          "error": "redis unavailable"}
    return Check(name, result["ok"], _describe(result))


def core_checks() -> Iterator[Check | Probe]:
    yield Probe("database", _database)
    yield Probe("redis", _redis)
    for queue in heartbeat.EXPECTED_QUEUES:
        yield Probe(f"worker:{queue}",
                    lambda q=queue: _needs_redis(f"worker:{q}",
                                                 lambda: heartbeat.queue_check(q)))
    yield Probe("beat", lambda: _needs_redis("beat", heartbeat.beat_check))
    yield Probe("runtimes", lambda: Check("runtimes", *runtimes_install.status(),
                                          required=False))


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def settle(item) -> Check:
    """The Check of a yielded item: a Check as is, a Probe run on its own."""
    if isinstance(item, Check):
        return item
    if isinstance(item, Probe):
        try:
            result = item.run()
        except Exception as exc:
            return Check(item.name, False, f"check failed: {_failure(exc)}", item.required)
        if isinstance(result, Check):
            return result
        return Check(item.name, False, f"returned {type(result).__name__}, not Check",
                     item.required)
    return Check("doctor", False, f"a check yielded {type(item).__name__}, not Check or Probe")


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
            items = iter(importlib.import_module(name).checks())
        except Exception as exc:
            yield Check(name, False, f"checks() failed: {_failure(exc)}")
            continue
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except Exception as exc:
                yield Check(name, False, f"checks() failed: {_failure(exc)}")
                break
            check = settle(item)
            if check.name == "doctor":
                check = Check(name, False, check.detail)
            yield check


def run(modules: Iterable[str] | None = None) -> list[Check]:
    return [*(settle(item) for item in core_checks()),
            *plugin_checks(app_modules() if modules is None else modules)]


def format_line(check: Check) -> str:
    mark = "ok  " if check.ok else ("FAIL" if check.required else "warn")
    return f"{mark}  {check.name:<24} {check.detail}".rstrip()
