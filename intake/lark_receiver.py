"""Lark's long-connection receiver: lark-oapi's WebSocket client in its own process.

An alternative to the events endpoint (no public URL needed). Events arrive already
authenticated by the connection (plaintext, no signature), are turned into the same
envelopes as webhook events, and enter intake the same way: stored unique on event id
(the frame is acknowledged then), processed off the connection by the intake drainer in
order per thread, deduplicated by message id.

`supervise()` (`manage.py lark_receivers`, which `amux run` starts) keeps one receiver
process (`manage.py lark_receiver --source SLUG`) per enabled Lark source set to receive by
long connection, reconciling every few seconds with what the panel says.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections

from amux_common.processes import die_with_parent
from intake import card_hooks, liveness, source_actions
from intake.models import Source
from intake.receive import queue
from intake.sources import plugin
from intake.sources.lark import BOT_ADDED, BOT_DELETED

log = logging.getLogger(__name__)

EVENTS = ("im.message.receive_v1", "drive.notice.comment_add_v1", card_hooks.CARD_ACTION,
          BOT_DELETED, BOT_ADDED)
LONG_CONNECTION = "long_connection"

# lark-oapi calls the handler inside its asyncio loop, where Django refuses database calls:
# intake runs in this one thread, and the frame is acknowledged once the event is stored.
_intake_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lark-intake")


def handle_raw(source: Source, raw: dict) -> tuple[int, dict]:
    """One event as the long connection delivers it (schema 2.0, decrypted) → intake."""
    header = raw.get("header") if isinstance(raw.get("header"), dict) else {}
    event_id, event_type = header.get("event_id"), header.get("event_type")
    if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
        return 400, {"error": {"code": "invalid", "message": "no event id", "fields": {}}}
    env = plugin("lark", source.config, source.secrets).envelope(event_id, event_type, raw)
    return queue(source, env, {"x-lark-receiver": "long_connection"})


def _receive(slug: str, raw: dict) -> None:
    source = Source.objects.filter(slug=slug, kind="lark", enabled=True).first()
    if source is None:
        log.warning("lark source %s is gone or disabled; event dropped", slug)
        return
    status, body = handle_raw(source, raw)
    log.info("lark event %s: %s %s", raw.get("header", {}).get("event_id"), status,
             body.get("outcome") or body.get("duplicate"))


def _receive_in_thread(slug: str, raw: dict) -> None:
    close_old_connections()
    try:
        _receive(slug, raw)
    finally:
        close_old_connections()


def card_action(slug: str, raw: dict) -> dict:
    """A card callback over the long connection: answered in the frame's reply (a toast,
    optionally the updated card), like the webhook answers it; never stored raw."""
    source = Source.objects.filter(slug=slug, kind="lark", enabled=True).first()
    if source is None:
        return card_hooks.toast("error", "This Lark source is disabled.")
    return card_hooks.answer(source, raw)[1]


def _card_action_in_thread(slug: str, raw: dict) -> dict:
    close_old_connections()
    try:
        return card_action(slug, raw)
    finally:
        close_old_connections()


def event_handler(slug: str):
    """An EventDispatcherHandler whose callbacks hand each event to intake."""
    import lark_oapi as lark

    def on_event(data) -> None:
        raw = json.loads(lark.JSON.marshal(data))
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # called from plain code
            return _receive(slug, raw)
        # Inside lark-oapi's loop. An error propagates to lark-oapi, which answers the
        # frame with a failure (Lark delivers it again).
        _intake_thread.submit(_receive_in_thread, slug, raw).result()

    def on_card(data):
        from lark_oapi.event.callback.model.p2_card_action_trigger import (
            P2CardActionTriggerResponse,
        )

        raw = json.loads(lark.JSON.marshal(data))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return P2CardActionTriggerResponse(card_action(slug, raw))
        return P2CardActionTriggerResponse(
            _intake_thread.submit(_card_action_in_thread, slug, raw).result())

    builder = lark.EventDispatcherHandler.builder("", "")
    builder.register_p2_im_message_receive_v1(on_event)
    builder.register_p2_card_action_trigger(on_card)
    builder.register_p2_customized_event("drive.notice.comment_add_v1", on_event)
    builder.register_p2_customized_event(BOT_DELETED, on_event)
    builder.register_p2_customized_event(BOT_ADDED, on_event)
    return builder.build()


def run(slug: str) -> None:
    import lark_oapi as lark

    source = Source.objects.get(slug=slug, kind="lark")
    client = lark.ws.Client(
        source.config["app_id"], source.secrets.get("app_secret", ""),
        event_handler=event_handler(slug), domain=source.config.get("domain"),
        log_level=lark.LogLevel.INFO, auto_reconnect=True,
    )
    close_old_connections()
    threading.Thread(target=heartbeat, args=(source.pk, client), daemon=True,
                     name="lark-heartbeat").start()
    client.start()  # blocks; the supervisor restarts the process if it dies


def connected(client) -> bool:
    """Whether lark-oapi's client holds an open connection now (it keeps none while it
    reconnects)."""
    return getattr(client, "_conn", None) is not None


def heartbeat(source_id: int, client, every: float | None = None,
              stop: threading.Event | None = None) -> None:
    """Beat for the source while this process lives (the source is stale once the beats
    stop: intake/liveness.py), saying whether the connection is up and since when."""
    stop = stop or threading.Event()
    every = every or liveness.beat_every()
    state, since = None, time.time()
    while True:
        now_connected = connected(client)
        if now_connected != state:
            state, since = now_connected, time.time()
        try:
            liveness.beat(source_id, connected=now_connected,
                          since=datetime.fromtimestamp(since, UTC))
        except Exception:  # Redis is away: the next beat tries again
            log.warning("lark receiver heartbeat failed", exc_info=True)
        if stop.wait(every):
            return


# -- the supervisor of receivers -------------------------------------------------------------

def wanted() -> dict[str, str]:
    """slug → fingerprint of what its receiver connects with, for each enabled Lark source
    that receives by long connection. A changed fingerprint restarts the receiver."""
    out = {}
    for source in Source.objects.filter(kind="lark", enabled=True).order_by("pk"):
        config = source.config or {}
        if config.get("receiver") != LONG_CONNECTION:
            continue
        basis = json.dumps([source.pk, config.get("domain"), config.get("app_id"),
                            (source.secrets or {}).get("app_secret")])
        out[source.slug] = hashlib.sha256(basis.encode()).hexdigest()
    return out


@dataclass
class Child:
    fingerprint: str
    proc: subprocess.Popen | None = None
    started: float = 0.0
    failures: int = 0
    retry_at: float = 0.0


class Supervisor:
    """Reconciles running receivers with the wanted ones: starts the missing, stops those
    of sources disabled, removed or changed, restarts one that exited after a backoff
    (1 s, doubling up to `backoff_max`; reset once a receiver ran `stable` seconds)."""

    def __init__(self, spawn: Callable[[str], subprocess.Popen], *,
                 on_exit: Callable[[str, int, float], None] = lambda *a: None,
                 on_stop: Callable[[str], None] = lambda slug: None,
                 clock: Callable[[], float] = time.monotonic, backoff_max: float = 60.0,
                 stable: float = 60.0, stop_wait: float = 10.0):
        self.spawn, self.on_exit, self.on_stop, self.clock = spawn, on_exit, on_stop, clock
        self.backoff_max, self.stable, self.stop_wait = backoff_max, stable, stop_wait
        self.children: dict[str, Child] = {}

    def tick(self, wanted: dict[str, str]) -> None:
        now = self.clock()
        for slug, child in list(self.children.items()):
            if wanted.get(slug) != child.fingerprint:
                self.on_stop(slug)
                self._stop([child])
                del self.children[slug]
            elif child.proc is not None and child.proc.poll() is not None:
                child.failures = 1 if now - child.started >= self.stable else child.failures + 1
                delay = min(self.backoff_max, 2.0 ** (child.failures - 1))
                code, child.proc, child.retry_at = child.proc.returncode, None, now + delay
                self.on_exit(slug, code, delay)
        for slug, fingerprint in wanted.items():
            child = self.children.setdefault(slug, Child(fingerprint))
            if child.proc is None and now >= child.retry_at:
                child.proc, child.started = self.spawn(slug), now

    def stop_all(self) -> None:
        self._stop(list(self.children.values()))
        self.children.clear()

    def _stop(self, children: list[Child]) -> None:
        procs = [c.proc for c in children if c.proc is not None and c.proc.poll() is None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        deadline = time.monotonic() + self.stop_wait
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for child in children:
            child.proc = None


def spawn_receiver(slug: str) -> subprocess.Popen:
    manage = Path(settings.BASE_DIR) / "manage.py"
    return subprocess.Popen(
        [sys.executable, str(manage), "lark_receiver", "--source", slug],
        cwd=settings.BASE_DIR, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent(signal.SIGTERM),
    )


def supervise(interval: float = 5.0, out: Callable[[str], None] = print) -> None:
    """Run the supervisor until SIGTERM or SIGINT, then stop every receiver it started."""
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def spawn(slug: str) -> subprocess.Popen:
        proc = spawn_receiver(slug)
        out(f"lark receivers: started {slug} (pid {proc.pid})")
        return proc

    def on_exit(slug: str, code: int, delay: float) -> None:
        out(f"lark receivers: {slug} exited with {code}; restarting in {delay:g} s")
        source_id = Source.objects.filter(slug=slug).values_list("pk", flat=True).first()
        if source_id is not None:
            source_actions.source_event_rejected(source_id=source_id, reason="receiver_exited",
                                                 error=True)

    supervisor = Supervisor(spawn, on_exit=on_exit,
                            on_stop=lambda slug: out(f"lark receivers: stopping {slug}"))
    out(f"lark receivers: reconciling every {interval:g} s")
    try:
        while not stop.is_set():
            try:
                close_old_connections()
                supervisor.tick(wanted())
            except Exception:  # the database is away: keep what runs, try again
                log.exception("reconciling lark receivers failed")
            stop.wait(interval)
    finally:
        supervisor.stop_all()
        out("lark receivers: stopped")
