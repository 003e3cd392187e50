"""One identity per session: under linux-dac and bwrap each session's runtime runs as a
user of its own, leased from a pool (``<AMUX_RUNTIME_POOL>-<n>``, created on first use)
when the session is made and kept until it is archived — recorded in the session's frozen
snapshot (``snapshot.identity``) and reused on every resume, since the files its runtime
made are that uid's. The lease is a row per slot (``RuntimeIdentity``, the slot its
primary key: two processes leasing at once cannot take the same one). Released at
archive: what still runs as the uid is killed and the session's directories are closed to
it before the slot is free for the next session (``isolation.retire``)."""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from runtimes import errors
from runtimes import isolation as backends
from sessions import locks
from sessions.models import Lifecycle, RuntimeIdentity, Session
from sessions.workdirs import state_dir

log = logging.getLogger(__name__)


def shared_group() -> str:
    """The base runtime user, whose group carries what every runtime may read."""
    return settings.AMUX_RUNTIME_USER


def app_server_user() -> str:
    """The user Codex app-servers amux spawns run as: one for all of them (an app-server
    hosts many threads), a pool member like the sessions' users but none of theirs, so no
    session reaches an app-server's workspace nor an app-server a session's."""
    return backends.pool_user(settings.AMUX_RUNTIME_POOL, "app")


def for_session(session: Session) -> str:
    """The user ``session``'s runtime runs as: the one it holds, else a free slot of the
    pool, leased now and recorded in its snapshot. Raises ``RuntimeStartFailed`` when
    the pool is full or its user cannot be made."""
    recorded = (session.snapshot or {}).get("identity") or {}
    if not connection.in_atomic_block and \
            not RuntimeIdentity.objects.filter(session_id=session.pk).exists():
        provision_ahead()
    with transaction.atomic():
        locked = locks.session(session.pk, "pk", "snapshot", "lifecycle")
        held = RuntimeIdentity.objects.filter(session=locked).first()
        if held is None and locked.lifecycle == Lifecycle.ARCHIVED:
            raise errors.RuntimeStartFailed("the session is archived: nothing of it runs")
        if held is not None:
            principal = backends.verified_principal(held.user, shared_group())
            if principal.uid != held.uid:
                raise errors.RuntimeStartFailed(
                    f"the session's runtime user {held.user!r} is uid {principal.uid} now, "
                    f"not {held.uid} as when its files were made: fix the user, or "
                    "archive the session and start a new one")
            return held.user
        row = _lease(locked)
        snapshot = dict(locked.snapshot or {})
        # beside the execution settings, not among them: those are copied to every run
        # and firing made with them, the identity is this session's alone
        snapshot["identity"] = {"user": row.user, "uid": row.uid}
        Session.objects.filter(pk=locked.pk).update(snapshot=snapshot)
        session.snapshot = snapshot
    if recorded and recorded.get("user") != row.user:
        log.info("session %s: runtime user %s (was %s before its lease was lost)",
                 session.pk, row.user, recorded.get("user"))
    return row.user


def _lease(session: Session | None, holder: str = "") -> RuntimeIdentity:
    """The lowest free slot, its user provisioned, leased to ``session`` (or, with none,
    held by the warm pool ``holder``; a slot another process took meanwhile: the next
    one)."""
    for _attempt in range(20):
        slot = _free_slot()
        if slot is None:
            raise errors.RuntimeStartFailed(
                f"all {settings.AMUX_RUNTIME_IDENTITIES} runtime identities are held by "
                "sessions that are not archived: archive sessions that are done, or raise "
                "AMUX_RUNTIME_IDENTITIES")
        user = backends.pool_user(settings.AMUX_RUNTIME_POOL, slot)
        # made already, as a rule (provision_ahead): then only looked up here
        principal = backends.verified_principal(user, shared_group())
        try:
            with transaction.atomic():
                row = RuntimeIdentity.objects.create(slot=slot, session=session,
                                                     holder=holder, user=user,
                                                     uid=principal.uid)
        except IntegrityError:
            continue
        transaction.on_commit(provision_ahead)  # the next lease's user, once this one holds
        return row
    raise errors.RuntimeStartFailed("no runtime identity could be leased (contention)")


def _free_slot() -> int | None:
    taken = set(RuntimeIdentity.objects.values_list("slot", flat=True))
    return next((n for n in range(1, settings.AMUX_RUNTIME_IDENTITIES + 1)
                 if n not in taken), None)


def provision_ahead() -> None:
    """The user of the slot the next lease takes, made now if missing, outside any
    transaction: useradd takes the system's user database lock (a second or more on a busy
    host), and a lease is often made inside a caller's transaction (a session created with
    its ticket, its conversation), whose row locks it would hold all that time. Called
    before a session's identity is leased and after each lease commits, so a lease only
    looks its user up. Best effort: the lease itself says why a user cannot be made."""
    if connection.in_atomic_block:
        return
    slot = _free_slot()
    if slot is None:
        return
    try:
        backends.verified_principal(backends.pool_user(settings.AMUX_RUNTIME_POOL, slot),
                                    shared_group())
    except errors.RuntimeStartFailed as exc:
        log.debug("runtime user of slot %s not made ahead: %s", slot, exc)


def principal_of(session_id: int | None
                 ) -> tuple[RuntimeIdentity, backends.Principal | None] | None:
    """The identity the session holds (None: none) and its user as the system knows it
    now, when that is still the uid it was leased with (else None beside the row)."""
    row = (RuntimeIdentity.objects.select_related("session").filter(
        session_id=session_id).first() if session_id else None)
    if row is None:
        return None
    principal = backends.lookup(row.user, shared_group())
    return row, principal if principal is not None and principal.uid == row.uid else None


def release(session_id: int) -> None:
    """The session's identity back to the pool, once nothing of it may run again (the
    session is archived): its processes killed, its work and state directories closed to
    the uid, its leftovers in the shared scratch directories removed, the slot freed."""
    held = principal_of(session_id)
    if held is None:
        return
    row, principal = held
    if principal is not None:
        dirs = [state_dir(row.session)]
        if row.session.workdir:
            dirs.append(Path(row.session.workdir))
        backends.retire(principal, tuple(dirs))
    RuntimeIdentity.objects.filter(pk=row.pk, session_id=session_id).delete()
    log.info("session %s: runtime user %s released", session_id, row.user)


# ------------------------------------------------------------------ the warm pool's slots
def lease_pooled(holder: str) -> tuple[int, str]:
    """A free slot for a pre-started runtime that no session holds yet (the warm pool of
    the runtime worker ``holder``, ``<host>:<pid>``): (slot, user)."""
    row = _lease(None, holder)
    return row.slot, row.user


def adopt_pooled(session: Session, slot: int, holder: str, state_dir: Path) -> str:
    """``session`` takes the pooled slot whose runtime it takes: the identity it was given
    when it was made (nothing ever ran as it: the session never started) goes back, the
    slot becomes the session's, recorded in its snapshot with the state directory the
    process was started with. Raises ``RuntimeStartFailed`` when the slot is not the
    pool's any more."""
    with transaction.atomic():
        locked = locks.session(session.pk, "pk", "snapshot", "lifecycle")
        row = RuntimeIdentity.objects.select_for_update().filter(
            slot=slot, session__isnull=True, holder=holder).first()
        if row is None:
            raise errors.RuntimeStartFailed(f"pooled runtime identity {slot} is not held")
        RuntimeIdentity.objects.filter(session=locked).delete()
        row.session, row.holder = locked, ""
        row.save(update_fields=["session", "holder"])
        snapshot = dict(locked.snapshot or {})
        snapshot["identity"] = {"user": row.user, "uid": row.uid,
                                "state_dir": str(state_dir)}
        Session.objects.filter(pk=locked.pk).update(snapshot=snapshot)
        session.snapshot = snapshot
    return row.user


def release_pooled(slot: int, holder: str, private_dirs: tuple[Path, ...] = ()) -> None:
    """A pooled slot no session took back to the pool: what runs as it ended, its
    directories closed to it."""
    row = RuntimeIdentity.objects.filter(slot=slot, session__isnull=True,
                                         holder=holder).first()
    if row is None:
        return
    principal = backends.lookup(row.user, shared_group())
    if principal is not None and principal.uid == row.uid:
        backends.retire(principal, private_dirs)
    RuntimeIdentity.objects.filter(pk=row.pk, session__isnull=True).delete()


def pooled_slots(holder_prefix: str) -> list[tuple[int, str]]:
    """The pooled slots (slot, holder) whose holder starts with ``holder_prefix``."""
    return list(RuntimeIdentity.objects.filter(
        session__isnull=True, holder__startswith=holder_prefix).values_list("slot", "holder"))
