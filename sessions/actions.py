"""The only writers of a session's lifecycle and of its host's lease, one function each:

- `create`: a new session's rows, in its creator's transaction (a ticket's dispatch, a
  goal's agent, a conversation, a task) or one of its own; what lies outside the
  database (its Redis control list, its work directory) is made strictly on commit;
- what a host reports: `lease_taken`, `lease_renewed`, `lease_released`,
  `lease_reclaimed`, `runtime_started`, `start_failed`, `retired`;
- what a person asks: `sleep`, `archive`;
- what another app gives it: `task_run_given`.

Each runs in one durable transaction (`create` in its creator's when there is one), locks
the session's row through sessions.locks (FOR NO KEY UPDATE: a row that only refers to
the session, such as a model credential, is not held up by it), lets
sessions.core.lifecycle decide, and sends what leaves the database (a control message,
an identity handed back) only once it has committed. The
lifecycle changes of a turn starting and ending are written with the turn by the
timeline's one writer (sessions/timeline.py), under the same lock and the same table.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from runtimes import errors
from sessions import control, identities, isolation, locks, model_credentials, timeline
from sessions.core import lifecycle
from sessions.hosting import lease_alive, lease_seconds
from sessions.models import Lifecycle, Session, SleepReason, TurnState
from sessions.refusals import CommandError, Conflict

_WORK_IN_FLIGHT = (TurnState.QUEUED, TurnState.RUNNING)


def _work_in_flight(session: Session) -> bool:
    return session.turns.filter(state__in=_WORK_IN_FLIGHT).exists()


# ------------------------------------------------------------------ creation
def create(session: Session, **created) -> Session:
    """Store a new session (its row, its runtime identity where its backend runs each
    session as its own user, its ``session.created`` event, which ``created`` adds to) in
    the caller's transaction, or in one of its own when the caller has none. Refused with
    a CommandError (409 ``no_runtime_identity``) when no identity can be leased: then
    none of it is stored."""
    if connection.in_atomic_block:
        return _create(session, created)
    if _own_identity(session):
        identities.provision_ahead()  # its user made before the transaction, not in it
    with transaction.atomic(durable=True):
        return _create(session, created)


def _create(session: Session, created: dict) -> Session:
    with transaction.atomic():  # a savepoint: a refused identity leaves no row behind
        session.save(force_insert=True)
        if not session.workdir:
            session.workdir = str(Path(settings.WORK_DIR) / f"session-{session.pk}")
            session.save(update_fields=["workdir"])
        if _own_identity(session):
            # one identity per session, frozen with the rest of its execution settings
            try:
                identities.for_session(session)
            except errors.RuntimeStartFailed as exc:
                raise CommandError(str(exc), code="no_runtime_identity", status=409) from exc
        timeline.note(session.pk, "session.created", {
            "runtime": session.runtime, "model": session.model,
            "provider": session.provider.slug if session.provider else None, **created})
    transaction.on_commit(lambda: _made(session))
    return session


def _own_identity(session: Session) -> bool:
    """Whether the session's frozen execution settings run it as a user of its own."""
    backend = ((session.snapshot or {}).get("execution") or {}).get("isolation")
    return bool(backend) and isolation.uses_principal(backend)


def _made(session: Session) -> None:
    """After the creation commits: a new session inherits nothing a former row with its id
    left queued in Redis (a database reset or restore keeps Redis: an old "archive" would
    end its first host), and its work directory exists."""
    control.clear(session.pk)
    ensure_workdir(session)


def ensure_workdir(session: Session) -> None:
    """The session's work directory, made if missing (at creation, and again by the host
    before it starts the runtime: a crash between a creation's commit and its directory
    leaves nothing the runtime misses). An attached session's is its app-server's, which
    amux does not make."""
    if session.workdir and not (session.snapshot or {}).get("attached"):
        Path(session.workdir).mkdir(parents=True, exist_ok=True)


# ------------------------------------------------------------------ the host's lease
def lease_taken(session_id: int, owner: str, host: str) -> bool:
    """Fact: a host took the session's lease — free, expired or its own already; False
    when another live host holds it or the session is archived."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        return Session.objects.filter(pk=session_id).exclude(
            lifecycle=Lifecycle.ARCHIVED).filter(
            Q(lease_owner="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
            | Q(lease_owner=owner)
        ).update(lease_owner=owner, lease_host=host,
                 lease_expires_at=now + timedelta(seconds=lease_seconds())) == 1


def lease_renewed(session_id: int, owner: str) -> bool:
    """Fact: the host is alive; False when it no longer holds the lease (it stops)."""
    with transaction.atomic(durable=True):
        return Session.objects.filter(pk=session_id, lease_owner=owner).update(
            lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds())) == 1


def lease_released(session_id: int, owner: str) -> None:
    """Fact: the host ended (its runtime retired or lost)."""
    with transaction.atomic(durable=True):
        Session.objects.filter(pk=session_id, lease_owner=owner).update(
            lease_owner="", lease_expires_at=None, runtime_tag="")


def lease_reclaimed(session_id: int, owner: str) -> bool:
    """Fact: the lease's owner was a process of this machine that no longer runs: the lease
    expires now, so a new host takes the session at once. False when another owner holds
    it meanwhile."""
    with transaction.atomic(durable=True):
        return Session.objects.filter(pk=session_id, lease_owner=owner).update(
            lease_expires_at=timezone.now()) == 1


# ------------------------------------------------------------------ the host's runtime
def runtime_started(session_id: int, owner: str, native: str, tag: str) -> None:
    """Fact: the host has the runtime up (``native``: its conversation, ``tag``: the
    processes' tag a successor kills if this host dies)."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        if session.lease_owner != owner:
            return
        session.native_ref = native
        session.runtime_tag = tag
        lifecycle.apply(session, lifecycle.RUNTIME_STARTED)
        session.last_active_at = timezone.now()
        session.save(update_fields=["native_ref", "runtime_tag", "lifecycle", "sleep_reason",
                                    "last_active_at", "updated_at"])


def start_failed(session_id: int, owner: str, code: str, message: str, reason: str) -> None:
    """Fact: the runtime did not start: the error on the timeline, and the session sleeps
    with ``reason`` (its host lets the lease go)."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        timeline.note(session_id, "error", {"code": code, "message": message[:2000]})
        if session.lease_owner != owner:
            return
        lifecycle.apply(session, lifecycle.RETIRED, reason)
        session.lease_owner = ""
        session.lease_expires_at = None
        session.save(update_fields=["lifecycle", "sleep_reason", "lease_owner",
                                    "lease_expires_at", "updated_at"])


def retired(session_id: int, owner: str, reason: str) -> bool:
    """Fact: the host let its runtime go (idle timeout, a sleep asked for): the session
    sleeps if nothing waits; False when work arrived meanwhile (the host serves it)."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        verdict = lifecycle.may_retire(holds_lease=session.lease_owner == owner,
                                       work_waiting=_work_in_flight(session))
        if verdict is None:
            return True
        if not verdict:
            return False
        lifecycle.apply(session, lifecycle.RETIRED, reason)
        session.lease_owner = ""
        session.lease_expires_at = None
        session.runtime_tag = ""
        session.save(update_fields=["lifecycle", "sleep_reason", "lease_owner",
                                    "lease_expires_at", "runtime_tag", "updated_at"])
        if session.lifecycle == Lifecycle.SLEEPING:
            timeline.note(session_id, "session.sleeping", {"reason": reason})
    return True


# ------------------------------------------------------------------ commands
def sleep(session_id: int) -> None:
    """Manual sleep: refused (409 ``busy``) while a turn is in flight or inputs are queued.
    An input that arrives after this check is served first: the host sleeps once the queue
    is empty, it never drops the request. A session no host serves sleeps here."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        _refuse(lifecycle.refusal(session.lifecycle, lifecycle.SLEEP,
                                  work_in_flight=_work_in_flight(session)),
                "the session has work in flight")
        if lease_alive(session):
            transaction.on_commit(lambda: control.send(session_id, "sleep"))
            return
        lifecycle.apply(session, lifecycle.RETIRED, SleepReason.MANUAL)
        session.save(update_fields=["lifecycle", "sleep_reason", "updated_at"])


def archive(session_id: int) -> None:
    """Refused (409 ``busy``) while a turn is in flight or inputs are queued; the host
    retires the runtime as soon as the turn it serves (if any) has ended, then hands its
    identity back; a session no host serves hands it back at once."""
    with transaction.atomic(durable=True):
        session = locks.session(session_id)
        verdict = lifecycle.refusal(session.lifecycle, lifecycle.ARCHIVE_COMMAND,
                                    work_in_flight=_work_in_flight(session))
        if verdict == lifecycle.ALREADY:
            return
        _refuse(verdict, "the session has work in flight; interrupt it first")
        lifecycle.apply(session, lifecycle.ARCHIVE)
        session.save(update_fields=["lifecycle", "updated_at"])
        model_credentials.revoke(session_id)
        timeline.note(session_id, "session.archived", {})
        hosted = lease_alive(session)
        transaction.on_commit(lambda: _archived(session_id, hosted))


# ------------------------------------------------------------------ what other apps give it
def task_run_given(session: Session, name: str | None = None) -> None:
    """Fact: a task run was given to the session (execution/task_runs.py): the timeline
    reads ``has_task_runs`` with the session's own row, so a turn's end reaches the task
    runs' subscriber; ``name`` renames a task's own session after its run. Written in the
    caller's transaction (a task given is a durable action of execution's, which holds
    its locks), as one UPDATE: the row lock it takes comes after the caller's."""
    if name is None:
        Session.objects.filter(pk=session.pk, has_task_runs=False).update(has_task_runs=True)
    else:
        Session.objects.filter(pk=session.pk).update(has_task_runs=True, name=name)
        session.name = name
    session.has_task_runs = True


def _archived(session_id: int, hosted: bool) -> None:
    control.send(session_id, "archive")
    if not hosted:  # else the host retires the runtime, then hands its identity back
        identities.release(session_id)


def _refuse(code: str | None, busy: str) -> None:
    if code is not None:
        raise Conflict("the session is archived" if code == "session_archived" else busy,
                       code=code)
