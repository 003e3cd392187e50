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
from django.db import IntegrityError, transaction

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


def _lease(session: Session) -> RuntimeIdentity:
    """The lowest free slot, its user provisioned, leased to ``session`` (a slot another
    process took meanwhile: the next one)."""
    limit = settings.AMUX_RUNTIME_IDENTITIES
    for _attempt in range(20):
        taken = set(RuntimeIdentity.objects.values_list("slot", flat=True))
        slot = next((n for n in range(1, limit + 1) if n not in taken), None)
        if slot is None:
            raise errors.RuntimeStartFailed(
                f"all {limit} runtime identities are held by sessions that are not "
                "archived: archive sessions that are done, or raise "
                "AMUX_RUNTIME_IDENTITIES")
        user = backends.pool_user(settings.AMUX_RUNTIME_POOL, slot)
        principal = backends.verified_principal(user, shared_group())
        try:
            with transaction.atomic():
                return RuntimeIdentity.objects.create(slot=slot, session=session,
                                                      user=user, uid=principal.uid)
        except IntegrityError:
            continue
    raise errors.RuntimeStartFailed("no runtime identity could be leased (contention)")


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
