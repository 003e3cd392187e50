"""The warm pool: pre-started, idle runtime processes a runtime worker keeps for the next
new session whose launch is the same (issue 35: start less).

A runtime that cannot host many sessions in one process (Pi) costs every new session a
whole start (Node alone: seconds on a busy machine). So a runtime worker keeps up to
``AMUX_SESSION_WARM_POOL`` idle processes per launch key (``runtimes.warm.launch_key``: runtime,
provider, model settings, arguments, environment, MCP configuration, isolation backend and
sandbox) it has been asked for recently, each started on a slot of its own prepared in
advance: its own work directory and state directory (HOME, config, native session files)
and, under linux-dac and bwrap, its own identity leased from the runtime pool (held by
this worker, ``RuntimeIdentity.holder``, until a session takes it). A new session — one
that never ran, whose work directory is still amux's empty default — whose launch key
matches takes a process: it adopts the slot's identity (the one it was given when made,
never used, goes back), its state directory and its work directory, and its credential
is written into that state directory (``runtimes.warm``), readable by its identity alone.
A process whose key differs is never handed over; a session that resumes a conversation,
was given a work directory of its own (a ticket's clone) or carries a credential any
other way starts cold as before.

The processes run on the pool's own thread and event loop (their pipes and bwrap's relay
live there); a session's host drives its adopted process through ``runtimes.warm.OnLoop``.
The pool refills in the background after each hand-over, forgets a launch nobody asked
for in ``KEY_TTL`` seconds, stops every idle process when the setting is 0 and when the
worker stops, and publishes its size and hits in Redis for `amux doctor`
(``status()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections, transaction

from amux_common.shared_redis import client
from runtimes import get_adapter, warm
from runtimes import isolation as backends
from runtimes.base import RuntimeAdapter, RuntimeConfig
from sessions import capacity, hosting, identities, isolation, locks
from sessions.models import Lifecycle, Session
from sessions.workdirs import runtime_root

log = logging.getLogger(__name__)

KEY_TTL = 1800.0  # a launch nobody asked for in this long is not kept warm
STATUS_KEY = "amux:warm_pool:{host}"
STATUS_TTL = 120
SLOT_PREFIX = "warm-"


def size() -> int:
    """Idle processes kept per launch key (0: none)."""
    return int(settings.AMUX_SESSION_WARM_POOL)


def holder() -> str:
    return f"{hosting.hostname()}:{os.getpid()}"


@dataclass
class Slot:
    key: str
    runtime: str
    workdir: Path
    state_dir: Path
    user: str
    identity: int | None  # the pooled RuntimeIdentity slot (linux-dac, bwrap)
    adapter: RuntimeAdapter
    started_at: float = field(default_factory=time.monotonic)


@dataclass
class _Wanted:
    runtime: str
    template: RuntimeConfig
    asked_at: float


class WarmPool:
    """This process's pool (one per runtime worker: ``POOL``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, list[Slot]] = {}
        self._starting: dict[str, int] = {}
        self._wanted: dict[str, _Wanted] = {}
        self.hits = 0
        self.misses = 0
        self.started = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._wake: asyncio.Event | None = None
        self._refiller: asyncio.Future[Any] | None = None

    # ------------------------------------------------------------ callers' side
    def want(self, runtime: str, key: str, cfg: RuntimeConfig) -> None:
        """A launch of ``key`` was asked for: kept warm from now on (for KEY_TTL)."""
        template = warm.slot_config(cfg, cfg.workdir, cfg.state_dir, cfg.runtime_user)
        with self._lock:
            self._wanted[key] = _Wanted(runtime, template, time.monotonic())
        self._ensure_running()
        self.kick()

    def pop(self, key: str) -> Slot | None:
        with self._lock:
            idle = self._idle.get(key) or []
            while idle:
                slot = idle.pop(0)
                if slot.adapter.alive:
                    self.hits += 1
                    return slot
                self._discard_later(slot)  # died while idle: gone, and refilled
            self.misses += 1
            return None

    def kick(self) -> None:
        loop, wake = self.loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has stopped
                loop.call_soon_threadsafe(wake.set)

    def counts(self) -> dict[str, Any]:
        with self._lock:
            return {"size": size(), "idle": sum(len(v) for v in self._idle.values()),
                    "starting": sum(self._starting.values()), "keys": len(self._wanted),
                    "hits": self.hits, "misses": self.misses, "started": self.started}

    def stop(self, timeout: float = 30) -> None:
        """Every idle process stopped and its slot released; the pool's thread ended."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(timeout)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        self.loop = self._thread = self._wake = self._refiller = None

    # ------------------------------------------------------------ the pool's thread
    def _ensure_running(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            ready = threading.Event()

            def run() -> None:
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                self.loop, self._wake = loop, asyncio.Event()
                self._refiller = loop.create_task(self._refill_forever())
                ready.set()
                try:
                    loop.run_forever()
                finally:
                    with contextlib.suppress(Exception):
                        loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.close()
                    close_old_connections()

            # long-lived: the processes it starts die with the thread that forked them
            self._thread = threading.Thread(target=run, name="warm-pool", daemon=True)
            self._thread.start()
        ready.wait(10)

    async def _refill_forever(self) -> None:
        await asyncio.to_thread(release_dead_holders)
        while True:
            assert self._wake is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 2.0)
            self._wake.clear()
            try:
                await self._refill_once()
            except Exception:
                log.exception("warm pool: refill failed")
                await asyncio.sleep(5)
            await asyncio.to_thread(self._publish)

    async def _refill_once(self) -> None:
        wanted_size, now = size(), time.monotonic()
        with self._lock:
            for key in [k for k, w in self._wanted.items() if now - w.asked_at > KEY_TTL]:
                del self._wanted[key]
            # a process that died while idle, and what the setting or the launches asked
            # for no longer keep
            surplus = [s for idle in self._idle.values() for s in idle
                       if not s.adapter.alive]
            for slot in surplus:
                self._idle[slot.key].remove(slot)
            surplus += [s for key, idle in self._idle.items() for s in
                        idle[(wanted_size if key in self._wanted else 0):]]
            for slot in surplus:
                if slot in self._idle[slot.key]:
                    self._idle[slot.key].remove(slot)
            needed = [(key, w) for key, w in self._wanted.items()
                      if len(self._idle.get(key) or []) + self._starting.get(key, 0)
                      < wanted_size]
        for slot in surplus:  # stopped if need be, its slot freed
            await self._discard(slot)
        if needed and not await asyncio.to_thread(_room_for_one_more, self.counts()):
            return
        # one start at a time: a refill never competes with itself for the machine
        for key, wanted in needed[:1]:
            await self._start_one(key, wanted)
            self.kick()  # the next one, after this has settled

    async def _start_one(self, key: str, wanted: _Wanted) -> None:
        with self._lock:
            self._starting[key] = self._starting.get(key, 0) + 1
        slot: Slot | None = None
        try:
            workdir, state_dir, user, identity = await asyncio.to_thread(
                _prepare_slot, wanted.template)
            cfg = warm.slot_config(wanted.template, workdir, state_dir, user)
            adapter = get_adapter(wanted.runtime)(cfg)
            slot = Slot(key, wanted.runtime, workdir, state_dir, user, identity, adapter)
            await adapter.start()
        except Exception as exc:
            log.warning("warm pool: a %s runtime did not start: %s", wanted.runtime, exc)
            if slot is not None:
                await self._discard(slot)
            await asyncio.sleep(5)  # a failing launch is not retried in a tight loop
            return
        finally:
            with self._lock:
                self._starting[key] -= 1
        with self._lock:
            self.started += 1
            self._idle.setdefault(key, []).append(slot)

    def _discard_later(self, slot: Slot) -> None:
        if self.loop is not None:
            asyncio.run_coroutine_threadsafe(self._discard(slot), self.loop)

    async def _discard(self, slot: Slot) -> None:
        with contextlib.suppress(Exception):
            await slot.adapter.close()
        try:
            await asyncio.to_thread(_release_slot, slot.identity, slot.workdir,
                                    slot.state_dir)
        except Exception:
            log.exception("warm pool: slot %s not released", slot.identity)

    async def _stop_all(self) -> None:
        if self._refiller is not None:
            self._refiller.cancel()
        with self._lock:
            slots = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
            self._wanted.clear()
        for slot in slots:
            await self._discard(slot)
        with contextlib.suppress(Exception):  # a stopped pool is no one's to show
            await asyncio.to_thread(client().delete, STATUS_KEY.format(host=holder()))

    def _publish(self) -> None:
        with contextlib.suppress(Exception):
            client().set(STATUS_KEY.format(host=holder()), json.dumps(
                {**self.counts(), "at": time.time()}), ex=STATUS_TTL)
        close_old_connections()


POOL = WarmPool()


# ------------------------------------------------------------------ slots (sync, Django)
def _prepare_slot(template: RuntimeConfig) -> tuple[Path, Path, str, int | None]:
    """A slot's own directories and, where each session runs as its own user, its own
    identity leased now and held by this worker."""
    name = f"{SLOT_PREFIX}{uuid.uuid4().hex[:12]}"
    workdir = Path(settings.WORK_DIR) / name
    state_dir = runtime_root() / name
    isolation.open_paths(Path(settings.DATA_DIR), runtime_root(), Path(settings.WORK_DIR))
    workdir.mkdir(parents=True)
    state_dir.mkdir(parents=True)
    try:
        if isolation.uses_principal(template.isolation):
            slot, user = identities.lease_pooled(holder())
            return workdir, state_dir, user, slot
        return workdir, state_dir, template.runtime_user, None
    finally:
        connections.close_all()


def _release_slot(identity: int | None, workdir: Path, state_dir: Path) -> None:
    try:
        if identity is not None:
            identities.release_pooled(identity, holder(), (state_dir, workdir))
    finally:
        connections.close_all()
    for path in (workdir, state_dir):
        _remove_tree(path)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _room_for_one_more(counts: dict[str, Any]) -> bool:
    """Warm processes count in capacity: one more is started only where the runtime
    workers' slots leave room beside the awake sessions and the idle and starting
    processes (no slots published yet, as in a test without a worker: no bound)."""
    try:
        room = capacity.room()
    finally:
        connections.close_all()
    return room.slots == 0 or room.free > counts["idle"] + counts["starting"]


def release_dead_holders() -> None:
    """Slots a former worker process of this host held when it died: released."""
    host = hosting.hostname()
    try:
        for slot, held_by in identities.pooled_slots(f"{host}:"):
            pid = held_by.rsplit(":", 1)[-1]
            if held_by == holder() or not pid.isdigit() or _alive(int(pid)):
                continue
            identities.release_pooled(slot, held_by)
    finally:
        connections.close_all()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def adoptable(session: Session) -> bool:
    """A session that never ran and whose work directory is still amux's empty default
    can take a pre-started process (and its directories)."""
    default = Path(settings.WORK_DIR) / f"session-{session.pk}"
    if session.native_ref or session.lifecycle != Lifecycle.CREATED \
            or Path(session.workdir or "") != default:
        return False
    try:
        return not any(default.iterdir())
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _adopt(session: Session, slot: Slot, credential: str) -> None:
    """The session takes the slot: its identity, state and work directories; then its
    credential is written where the process reads it, for its identity alone."""
    if slot.identity is not None:
        identities.adopt_pooled(session, slot.identity, holder(), slot.state_dir)
    else:
        with transaction.atomic():
            locked = locks.session(session.pk, "pk", "snapshot")
            snapshot = dict(locked.snapshot or {})
            snapshot["identity"] = {"state_dir": str(slot.state_dir)}
            Session.objects.filter(pk=session.pk).update(snapshot=snapshot)
            session.snapshot = snapshot
    former = Path(session.workdir)
    Session.objects.filter(pk=session.pk).update(workdir=str(slot.workdir))
    session.workdir = str(slot.workdir)
    with contextlib.suppress(OSError):
        former.rmdir()  # amux's empty default, never used
    _write_key(slot, credential)


def _write_key(slot: Slot, credential: str) -> None:
    path = slot.state_dir / warm.KEY_FILE
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(credential)
    principal = slot.adapter.launch.principal if slot.adapter.launch else None
    if principal is not None:
        backends.hand_private(partial, principal)
    os.replace(partial, path)


async def take(session: Session, cfg: RuntimeConfig,
               db: Callable[..., Awaitable[Any]]) -> RuntimeAdapter | None:
    """A pre-started process of the session's launch, now the session's (None: start one
    as before). Every poolable launch asked for is kept warm from now on. ``db`` runs a
    call on the host's database thread."""
    if size() <= 0 or session.native_ref:
        return None
    runtime = get_adapter(session.runtime)
    session_cfg, cfg = cfg, warm.pooled_form(cfg)
    why = warm.not_poolable(runtime, cfg) or (
        None if await db(adoptable, session) else "it has run, or has a work directory")
    if why is not None:
        log.debug("session %s starts its runtime cold: %s", session.pk, why)
        return None
    key = warm.launch_key(session.runtime, cfg)
    POOL.want(session.runtime, key, cfg)
    slot = POOL.pop(key)
    if slot is None:
        return None
    try:
        await db(_adopt, session, slot, session_cfg.provider.api_key)
    except Exception:
        log.exception("session %s: the pre-started runtime could not be taken", session.pk)
        POOL._discard_later(slot)
        return None
    POOL.kick()  # refilled behind the session that took it
    slot.adapter.config = warm.adopted_config(cfg, slot.adapter.config)
    assert POOL.loop is not None
    return warm.OnLoop(slot.adapter, POOL.loop)  # type: ignore[return-value]


def status() -> list[dict[str, Any]]:
    """Each runtime worker's pool as it last published it (doctor, the Sessions page)."""
    out = []
    try:
        redis = client()
        for name in redis.scan_iter(STATUS_KEY.format(host="*")):
            raw = redis.get(name)
            if raw:
                entry = json.loads(raw)
                entry["worker"] = name.decode().split(":", 2)[-1]
                out.append(entry)
    except Exception:  # noqa: BLE001 - a status line never fails its page
        return out
    return out
