"""A drainer process for test_outbox_concurrency.py: `python -m tests.integration.outbox_drainer`.

Runs the real `effects.outbox.drain()` against the test database (AMUX_TEST_DB_NAME) with
handlers that record into Redis (AMUX_TEST_PREFIX):
- `<p>:run:<id>` SET NX while a handler runs; a second concurrent run pushes the id onto
  `<p>:overlap`;
- `<p>:calls` / `<p>:done` hashes count calls and successes per effect id;
- `<p>:order:<channel>` lists the payload's `n` in the order relay/notice rows succeeded;
- `<p>:running:<kind>` counts handlers of a kind running now; every value seen is pushed
  onto `<p>:seen:<kind>`.
A payload's `fail` and `later` make the first calls raise an error, then `Later`; `sleep`
slows the handler. With AMUX_TEST_VICTIM=1 the process announces its 10th call on
`<p>:victim` and then hangs, so the test can SIGKILL it mid-batch.
"""

from __future__ import annotations

import os
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")
from django.conf import settings  # noqa: E402

settings.DATABASES["default"]["NAME"] = os.environ["AMUX_TEST_DB_NAME"]
django.setup()

import redis  # noqa: E402

from effects import outbox  # noqa: E402
from effects.models import Effect  # noqa: E402

PREFIX = os.environ["AMUX_TEST_PREFIX"]
VICTIM = os.environ.get("AMUX_TEST_VICTIM") == "1"
OWNER = outbox.worker_id()
r = redis.Redis.from_url(settings.REDIS_URL)
calls_here = 0


def make_handler(kind: str):
    def handle(effect_id: int, payload: dict) -> None:
        global calls_here
        calls_here += 1
        if VICTIM and calls_here == 10:
            r.set(f"{PREFIX}:victim", effect_id)
            time.sleep(600)  # killed here, mid-batch
        if not r.set(f"{PREFIX}:run:{effect_id}", OWNER, nx=True, ex=60):
            r.rpush(f"{PREFIX}:overlap", effect_id)
        running = r.incr(f"{PREFIX}:running:{kind}")
        r.rpush(f"{PREFIX}:seen:{kind}", running)
        try:
            calls = r.hincrby(f"{PREFIX}:calls", effect_id, 1)
            if calls <= payload.get("fail", 0):
                raise RuntimeError(f"transient failure {calls}")
            if calls <= payload.get("fail", 0) + payload.get("later", 0):
                raise outbox.Later(0.1, "busy")
            if payload.get("sleep"):
                time.sleep(payload["sleep"])
            r.hincrby(f"{PREFIX}:done", effect_id, 1)
            if payload.get("channel"):
                r.rpush(f"{PREFIX}:order:{payload['channel']}", payload["n"])
        finally:
            r.decr(f"{PREFIX}:running:{kind}")
            r.delete(f"{PREFIX}:run:{effect_id}")

    return handle


def main() -> int:
    for kind in outbox.KINDS:
        outbox.register(kind, replace=True)(make_handler(kind))
    r.rpush(f"{PREFIX}:started", OWNER)
    deadline = time.monotonic() + float(os.environ.get("AMUX_TEST_SECONDS", "240"))
    finished = 0
    while time.monotonic() < deadline:
        finished += outbox.drain(owner=OWNER, seconds=10)
        if not Effect.objects.filter(state="pending").exists():
            break
        time.sleep(0.05)
    r.hincrby(f"{PREFIX}:finished", OWNER, finished)
    return 0


if __name__ == "__main__":
    sys.exit(main())
