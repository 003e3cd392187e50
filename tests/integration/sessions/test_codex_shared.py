"""Codex sessions as threads of one shared app-server (private-home): the real app-server
against the scripted model server behind amux's gateway. Each thread carries its own
session's settings (credential, environment, work directory); a crash of the shared
process ends every turn in it cancelled, queues it again and resumes each thread in a new
process."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from runtimes import codex_shared
from sessions import services
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for, wait_for_tokens

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture
def private_home(settings):
    settings.AMUX_ISOLATION = "private-home"
    settings.AMUX_CODEX_THREADS_PER_APP_SERVER = 64
    yield
    assert not codex_shared.REGISTRY.live(), "a shared app-server outlived its sessions"


def _session():
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    return Session.objects.get(pk=session.pk)


def _hosts(sessions):
    outcomes: dict[int, str] = {}
    threads = [threading.Thread(target=lambda pk=s.pk: outcomes.__setitem__(pk, run_host(pk)))
               for s in sessions]
    for thread in threads:
        thread.start()
    return threads, outcomes


def _terminals(session_id):
    return list(TimelineEvent.objects.filter(
        session_id=session_id, type__in=["turn.completed", "turn.failed", "turn.cancelled"])
        .order_by("seq").values_list("turn__seq", "type", "payload"))


def test_two_sessions_are_threads_of_one_app_server_each_with_its_own_settings(
        private_home, openai_provider, session_dirs, model_server):
    first, second = _session(), _session()
    started = codex_shared.REGISTRY.started
    model_server.responder = lambda body: (
        ToolCall('echo "$HOME $AMUX_RUNTIME_TAG ${AMUX_PROVIDER_KEY:-none}" > seen.txt')
        if "function_call_output" not in str(body) else Text("done"))
    for session in (first, second):
        services.post_message(session.pk, f"look around {session.pk}")
    threads, outcomes = _hosts([first, second])
    for thread in threads:
        thread.join(120)
    assert outcomes == {first.pk: "slept", second.pk: "slept"}
    assert codex_shared.REGISTRY.started == started + 1  # one process carried both
    for session in (first, second):
        session.refresh_from_db()
        assert [t[:2] for t in _terminals(session.pk)] == [(1, "turn.completed")]
        home, tag, key = (session_dirs / "work" / f"session-{session.pk}" / "seen.txt") \
            .read_text().split()
        # its commands ran with its own HOME and tag, and no key in their environment
        assert home == str(services.state_dir(session) / "home")
        assert tag == session.runtime_tag or not session.runtime_tag
        assert key == "none"
        # each thread reached the gateway with its own session's credential: the
        # gateway counted each session's two model calls to that session
        wait_for_tokens(session, 2 * 110)
    assert first.native_ref != second.native_ref
    # nothing of a session's credential went to the shared state
    shared = session_dirs / "runtime" / "codex-shared"
    assert shared.is_dir()
    for path in shared.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert b"sk-test-secret" not in path.read_bytes()


def test_a_crash_of_the_shared_app_server_cancels_every_turn_and_each_resumes(
        private_home, openai_provider, session_dirs, model_server):
    sessions = [_session(), _session()]
    hold = threading.Event()

    def answer(body):
        if not hold.is_set():
            return Text("too late", delay=60)  # in flight when the process dies
        return Text("resumed")

    model_server.responder = answer
    started = codex_shared.REGISTRY.started
    for session in sessions:
        services.post_message(session.pk, f"work {session.pk}")
    threads, outcomes = _hosts(sessions)
    model_server.wait_for_requests(2, timeout=90)
    servers = wait_for(lambda: codex_shared.REGISTRY.live())
    assert len(servers) == 1 and len(servers[0].users) == 2
    natives = {s.pk: Session.objects.get(pk=s.pk).native_ref for s in sessions}
    hold.set()
    os.killpg(servers[0].proc.pid, signal.SIGKILL)
    for thread in threads:
        thread.join(120)
    assert outcomes == {s.pk: "slept" for s in sessions}
    assert codex_shared.REGISTRY.started == started + 2  # the lost one, and its successor
    for session in sessions:
        terminals = _terminals(session.pk)
        assert [t[:2] for t in terminals] == [(1, "turn.cancelled"), (2, "turn.completed")]
        assert terminals[0][2].get("reason") == "app_server_lost"
        session.refresh_from_db()
        assert session.native_ref == natives[session.pk]  # the same thread, resumed
        texts = [e.payload["text"] for e in TimelineEvent.objects.filter(
            session=session, type="message.completed").order_by("seq")]
        assert texts == ["resumed"]


def test_sessions_with_an_identity_of_their_own_never_share(openai_provider, session_dirs,
                                                              settings):
    for backend in ("linux-dac", "bwrap"):
        settings.AMUX_ISOLATION = backend
        session = _session()
        cfg = services.runtime_config(session, launch=False)
        assert cfg.shared_app_server == 0
    settings.AMUX_ISOLATION = "private-home"
    settings.AMUX_CODEX_THREADS_PER_APP_SERVER = 0
    assert services.runtime_config(_session(), launch=False).shared_app_server == 0
    settings.AMUX_CODEX_THREADS_PER_APP_SERVER = 64
    assert services.runtime_config(_session(), launch=False).shared_app_server == 64


def test_a_full_app_server_makes_room_for_a_second_and_the_last_one_out_stops_it(tmp_path):
    from pathlib import Path

    from django.conf import settings

    from runtimes.codex import codex_binary
    from tests.support.runtimes import run_async

    spec = codex_shared.ServerSpec(codex_binary(Path(settings.AMUX_RUNTIMES_DIR)), (),
                                   tmp_path / "shared")
    registry = codex_shared.Registry()

    async def main():
        first = await registry.acquire(spec, "a", 2)
        second = await registry.acquire(spec, "b", 2)
        third = await registry.acquire(spec, "c", 2)  # the first holds two: a second one
        assert first is second and third is not first and registry.started == 2
        # one CODEX_HOME for both (a thread resumes in either), a state directory each
        assert first.state != third.state and first.state.parent == third.state.parent
        await registry.release(first, "a")
        assert first.alive  # "b" is still in it
        await registry.release(first, "b")
        await registry.release(third, "c")
        assert not first.alive and not third.alive and not registry.live()
        assert not first.state.exists()

    run_async(main())
