"""The session's lifecycle writers (sessions/actions.py): each decides under the session's
lock by the core's table, and what leaves the database (a control message, the work
directory, a runtime identity handed back) goes only once its transaction has committed.
Run on PostgreSQL and on SQLite alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from amux_common.shared_redis import client
from sessions import actions, control, services, timeline
from sessions.models import Session, SleepReason, TimelineEvent
from sessions.new_session import Launch, SessionSpec
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    f.ProviderProfileFactory(slug="local")
    made = services.create_session(Launch.direct(runtime="pi", provider="local", model="m"))
    client().delete(control.key(made.pk))
    return made


def _controls(session_id: int) -> list[bytes]:
    return client().lrange(control.key(session_id), 0, -1)


def _held(session: Session, owner: str = "here:1:a") -> None:
    assert actions.lease_taken(session.pk, owner, "here")


def test_a_creation_in_its_caller_s_transaction_touches_nothing_outside_until_commit(
        settings, tmp_path, django_capture_on_commit_callbacks):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    f.ProviderProfileFactory(slug="local")
    with django_capture_on_commit_callbacks() as after_commit, transaction.atomic():
        made = services.create_session(Launch.direct(runtime="pi", provider="local", model="m"))
        client().rpush(control.key(made.pk), b'{"op": "archive"}')  # a former row's
        assert not Path(made.workdir).exists()
    assert Path(made.workdir).name == f"session-{made.pk}"
    assert not Path(made.workdir).exists() and _controls(made.pk)
    for callback in after_commit:  # the commit
        callback()
    assert Path(made.workdir).is_dir() and not _controls(made.pk)
    assert TimelineEvent.objects.filter(session=made, type="session.created").count() == 1


def test_a_creation_rolled_back_with_its_caller_leaves_nothing(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    f.ProviderProfileFactory(slug="local")

    class Refused(Exception):
        pass

    with pytest.raises(Refused), transaction.atomic():
        services.create_session(Launch.direct(runtime="pi", provider="local", model="m"),
                                spec=SessionSpec(name="gone"))
        raise Refused
    assert not Session.objects.filter(name="gone").exists()
    assert not (settings.WORK_DIR).exists() or not any(settings.WORK_DIR.iterdir())


def test_the_lease_is_one_host_s_at_a_time(session):
    assert actions.lease_taken(session.pk, "a:1:x", "a")
    assert not actions.lease_taken(session.pk, "b:2:y", "b")  # a live lease is held
    assert actions.lease_taken(session.pk, "a:1:x", "a")  # its own again
    assert actions.lease_renewed(session.pk, "a:1:x")
    assert not actions.lease_renewed(session.pk, "b:2:y")
    assert actions.lease_reclaimed(session.pk, "a:1:x")  # expired now: free for another
    assert actions.lease_taken(session.pk, "b:2:y", "b")
    assert not actions.lease_reclaimed(session.pk, "a:1:x")
    actions.lease_released(session.pk, "a:1:x")  # not its lease: nothing changes
    assert Session.objects.get(pk=session.pk).lease_owner == "b:2:y"
    actions.lease_released(session.pk, "b:2:y")
    row = Session.objects.get(pk=session.pk)
    assert (row.lease_owner, row.lease_expires_at, row.runtime_tag) == ("", None, "")


def test_an_archived_session_gives_no_lease(session):
    actions.archive(session.pk)
    assert not actions.lease_taken(session.pk, "a:1:x", "a")


def test_the_runtime_starting_and_failing_to_start(session):
    _held(session)
    actions.runtime_started(session.pk, "someone-else", "n1", "t1")  # not its lease
    assert Session.objects.get(pk=session.pk).lifecycle == "created"
    actions.runtime_started(session.pk, "here:1:a", "n1", "t1")
    row = Session.objects.get(pk=session.pk)
    assert (row.lifecycle, row.native_ref, row.runtime_tag) == ("idle", "n1", "t1")
    actions.start_failed(session.pk, "here:1:a", "spawn_failed", "no binary",
                         SleepReason.RESTART_FAILED)
    row = Session.objects.get(pk=session.pk)
    assert (row.lifecycle, row.sleep_reason, row.lease_owner) == (
        "sleeping", "restart_failed", "")
    error = TimelineEvent.objects.get(session=session, type="error")
    assert error.payload == {"code": "spawn_failed", "message": "no binary"}


def test_a_host_retires_only_what_has_no_work_waiting(session):
    _held(session)
    actions.runtime_started(session.pk, "here:1:a", "n1", "t1")
    services.post_message(session.pk, "one more")
    assert actions.retired(session.pk, "here:1:a", SleepReason.IDLE_TIMEOUT) is False
    assert Session.objects.get(pk=session.pk).lifecycle == "idle"
    turn = timeline.turn_in_flight(session.pk) or session.turns.get()
    session.turns.filter(pk=turn.pk).update(state="completed")
    assert actions.retired(session.pk, "another:2:b", SleepReason.IDLE_TIMEOUT) is True
    assert Session.objects.get(pk=session.pk).lease_owner == "here:1:a"  # not another's
    assert actions.retired(session.pk, "here:1:a", SleepReason.IDLE_TIMEOUT) is True
    row = Session.objects.get(pk=session.pk)
    assert (row.lifecycle, row.sleep_reason, row.lease_owner) == (
        "sleeping", "idle_timeout", "")
    assert TimelineEvent.objects.filter(session=session, type="session.sleeping").exists()


def test_sleep_refuses_work_in_flight_and_tells_a_host_only_after_commit(
        session, django_capture_on_commit_callbacks):
    services.post_message(session.pk, "queued")
    with pytest.raises(services.Conflict) as refused:
        actions.sleep(session.pk)
    assert refused.value.code == "busy"
    session.turns.update(state="completed")
    _held(session)
    with django_capture_on_commit_callbacks() as after_commit:
        actions.sleep(session.pk)
    assert not _controls(session.pk)
    for callback in after_commit:  # the commit
        callback()
    assert b'"sleep"' in _controls(session.pk)[0]
    assert Session.objects.get(pk=session.pk).lifecycle == "created"  # its host sleeps it


def test_sleep_of_a_session_no_host_serves_is_written_at_once(session):
    actions.sleep(session.pk)
    row = Session.objects.get(pk=session.pk)
    assert (row.lifecycle, row.sleep_reason) == ("sleeping", "manual")
    assert not _controls(session.pk)


def test_archive_is_refused_while_busy_and_done_once(
        session, django_capture_on_commit_callbacks):
    services.post_message(session.pk, "queued")
    with pytest.raises(services.Conflict) as refused:
        actions.archive(session.pk)
    assert refused.value.code == "busy"
    session.turns.update(state="completed")
    with django_capture_on_commit_callbacks(execute=True):
        actions.archive(session.pk)
    assert b'"archive"' in _controls(session.pk)[0]
    assert Session.objects.get(pk=session.pk).lifecycle == "archived"
    with django_capture_on_commit_callbacks(execute=True) as again:
        actions.archive(session.pk)  # archived already: nothing, not an error
    assert not again and len(_controls(session.pk)) == 1  # no second "archive"
    with pytest.raises(services.Conflict) as refused:
        actions.sleep(session.pk)
    assert refused.value.code == "session_archived"
    assert TimelineEvent.objects.filter(session=session, type="session.archived").count() == 1
