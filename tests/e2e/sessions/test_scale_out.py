"""More than one machine: two runtime workers with different host names (standing in for
two machines against one PostgreSQL and one Redis). Sessions spread over both; a session
wakes again on the host that holds its files (`runtime.<host>`); when that host dies its
sessions move through the lease to the other, resuming their native conversations."""

from __future__ import annotations

import time

import pytest

from sessions import services
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.support.model_server import Text
from tests.support.workers import Worker, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]


def _completed(session_id) -> int:
    return TimelineEvent.objects.filter(session_id=session_id, type="turn.completed").count()


def _tell(ids, *boxes) -> None:
    """What a failure needs to be understood: each session's row and the workers' logs."""
    for pk in ids:
        s = Session.objects.get(pk=pk)
        turns = list(s.turns.values_list("seq", "state"))
        print(f"session {pk}: {s.lifecycle} host={s.lease_host} owner={s.lease_owner} "
              f"expires={s.lease_expires_at} turns={turns}")
    for box in boxes:
        print(f"--- {box.log_path.name} (last 150 lines)")
        print("\n".join(box.log().splitlines()[-150:]))


def _box(name, session_dirs, tmp_path, beat=False):
    env = worker_env(session_dirs, AMUX_HOSTNAME=name, AMUX_SESSION_LEASE_SECONDS="6")
    # the one with beat also runs its sweep (on `default`)
    queues = f"runtime,runtime.{name}" + (",default" if beat else "")
    return Worker(name, env, queues=queues, sessions=2, beat=beat,
                  log=tmp_path / f"{name}.log")


def test_sessions_spread_stay_pinned_and_move_when_their_host_dies(
        openai_provider, session_dirs, model_server, tmp_path):
    from sessions import capacity

    purge_queues()
    model_server.responder = lambda body: Text("ok")
    box1 = _box("box1", session_dirs, tmp_path)
    box2 = _box("box2", session_dirs, tmp_path, beat=True)
    try:
        # box2 also takes the sweep from `default`: its slots are shared with it
        wait_for(lambda: capacity.room().slots == 4, timeout=60)
        ids = [services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                     model="gpt-5.5")).pk for _ in range(4)]
        for pk in ids:
            services.post_message(pk, "first")
        wait_for(lambda: all(_completed(pk) == 1 for pk in ids), timeout=120)
        hosts = {pk: Session.objects.get(pk=pk).lease_host for pk in ids}
        assert sorted(hosts.values()) == ["box1", "box1", "box2", "box2"]  # 2 slots each
        # asleep, then woken: each goes back to the machine that holds its files
        for pk in ids:
            services.sleep(pk)
        wait_for(lambda: all(Session.objects.get(pk=pk).lifecycle == "sleeping"
                             for pk in ids), timeout=60)
        for pk in ids:
            services.post_message(pk, "second")
        wait_for(lambda: all(_completed(pk) == 2 for pk in ids), timeout=120)
        assert {pk: Session.objects.get(pk=pk).lease_host for pk in ids} == hosts
        # box2 makes room; box1 dies with its two sessions awake
        on_box1 = [pk for pk in ids if hosts[pk] == "box1"]
        native = {pk: Session.objects.get(pk=pk).native_ref for pk in on_box1}
        for pk in ids:
            if hosts[pk] == "box2":
                services.sleep(pk)
        wait_for(lambda: capacity.room().awake == 2, timeout=60)
        box1.kill()
        died = time.monotonic()
        moved = wait_for(lambda: all(
            (s := Session.objects.get(pk=pk)).lease_host == "box2"
            and services.lease_alive(s) for pk in on_box1), timeout=120)
        print(f"box1's sessions resumed on box2 {time.monotonic() - died:.1f} s after it died")
        assert moved
        for pk in on_box1:
            assert Session.objects.get(pk=pk).native_ref == native[pk]  # same conversation
            services.post_message(pk, "third")
        wait_for(lambda: all(_completed(pk) == 3 for pk in on_box1), timeout=120)
    except BaseException:
        _tell(ids if "ids" in locals() else [], box1, box2)
        raise
    finally:
        box1.stop()
        box2.stop()
