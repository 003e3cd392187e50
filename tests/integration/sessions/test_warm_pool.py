"""The warm pool (sessions/warm_pool.py) with the real Pi against the scripted model
server, under this machine's isolation backend: a new session takes a pre-started process
of its launch and runs its turns with its own frozen settings and credential; a launch
that differs never takes it; one session cannot read the other's files or credential; the
pool refills after a hand-over and empties when the setting goes to 0."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from runtimes import warm
from runtimes.base import tagged_pids
from sessions import doctor, services, warm_pool
from sessions.models import RuntimeIdentity, Session, TimelineEvent
from sessions.new_session import Launch
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for

# each test starts the real Pi three or four times: well past 90 s on a loaded machine
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(400),
              pytest.mark.slow]


@pytest.fixture
def pool(settings, monkeypatch):
    settings.AMUX_SESSION_WARM_POOL = 1
    fresh = warm_pool.WarmPool()
    monkeypatch.setattr(warm_pool, "POOL", fresh)
    yield fresh
    fresh.stop()
    assert not RuntimeIdentity.objects.filter(session__isnull=True).exists()


def _session(**choices):
    session = services.create_session(Launch.direct(runtime="pi", provider="scripted",
                                                    model="scripted-model", **choices))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    return Session.objects.get(pk=session.pk)


def _idle(pool, count):
    return wait_for(lambda: pool.counts()["idle"] == count, timeout=120)


def _tool_output(session_id):
    return [e.payload.get("output") or "" for e in TimelineEvent.objects.filter(
        session_id=session_id, type="tool.completed").order_by("seq")]


def test_a_new_session_takes_a_warm_process_and_the_pool_refills(
        pool, openai_provider, session_dirs, model_server):
    first = _session()
    model_server.script(Text("cold"))
    services.post_message(first.pk, "hello")
    assert run_host(first.pk) == "slept"
    first.refresh_from_db()
    assert Path(first.workdir).name == f"session-{first.pk}"  # nothing was warm yet
    assert pool.counts()["misses"] == 1
    _idle(pool, 1)  # its launch is kept warm from now on

    second = _session()
    model_server.script(ToolCall("echo made here > made.txt && pwd"), Text("warm"))
    services.post_message(second.pk, "make a file")
    assert run_host(second.pk) == "slept"
    second.refresh_from_db()
    assert pool.counts()["hits"] == 1
    workdir = Path(second.workdir)
    assert workdir.name.startswith(warm_pool.SLOT_PREFIX)  # the slot's directories, now its own
    assert (workdir / "made.txt").read_text() == "made here\n"
    assert str(workdir) in _tool_output(second.pk)[0]
    texts = list(TimelineEvent.objects.filter(session=second, type="message.completed")
                 .values_list("payload__text", flat=True))
    assert texts == ["warm"]  # its model requests passed the gateway with its credential
    # its frozen settings: the model it was made with, and its native conversation resumes
    assert model_server.tool_requests()[-1].body["model"] == "scripted-model"
    state = Path(second.snapshot["identity"]["state_dir"])
    assert Path(second.native_ref).is_relative_to(state)
    model_server.script(Text("again"))
    services.post_message(second.pk, "once more")
    assert run_host(second.pk) == "slept"  # a cold resume of the same conversation
    second.refresh_from_db()
    assert second.native_ref and Path(second.native_ref).is_relative_to(state)
    assert list(TimelineEvent.objects.filter(session=second, type="message.completed")
                .values_list("payload__text", flat=True)) == ["warm", "again"]
    assert not TimelineEvent.objects.filter(session=second, type="error").exists()
    _idle(pool, 1)  # refilled behind the session that took it
    assert pool.counts()["started"] == 2
    # what an operator sees (`amux doctor`): the size, what is idle, what was taken
    detail = wait_for(lambda: (lambda d: "1 idle" in d and d)(
        doctor.warm_pool_check().detail), timeout=30)
    assert "1 per launch" in detail and "1 new session(s) took one" in detail


def test_a_launch_that_differs_never_takes_it(pool, openai_provider, session_dirs,
                                              model_server):
    first = _session()
    model_server.script(Text("cold"))
    services.post_message(first.pk, "hello")
    assert run_host(first.pk) == "slept"
    _idle(pool, 1)
    other = _session(effort="high")  # another native launch setting (Pi's --thinking)
    model_server.script(Text("cold too"))
    services.post_message(other.pk, "hello")
    assert run_host(other.pk) == "slept"
    other.refresh_from_db()
    assert pool.counts()["hits"] == 0
    assert Path(other.workdir).name == f"session-{other.pk}"
    given = Session.objects.get(pk=other.pk)
    assert given.snapshot.get("effort") == "high"


def test_one_session_cannot_read_anothers_files_or_credential(
        pool, openai_provider, session_dirs, model_server):
    first = _session()
    model_server.script(Text("cold"))
    services.post_message(first.pk, "hello")
    assert run_host(first.pk) == "slept"
    _idle(pool, 1)
    second = _session()
    model_server.script(Text("warm"))
    services.post_message(second.pk, "hello")
    assert run_host(second.pk) == "slept"
    second.refresh_from_db()
    key = Path(second.snapshot["identity"]["state_dir"]) / warm.KEY_FILE
    credential = key.read_text()
    assert credential.startswith("amux-") or len(credential) > 20
    mode = os.stat(key).st_mode & 0o777
    assert mode & 0o007 == 0  # nobody but its identity (and amux)
    secret = Path(second.workdir) / "secret.txt"
    secret.write_text("second's own\n")
    os.chmod(secret, 0o660)
    model_server.script(ToolCall(f"cat {key}; cat {secret}; echo end"), Text("tried"))
    services.post_message(first.pk, "look around")
    assert run_host(first.pk) == "slept"
    output = _tool_output(first.pk)[-1]
    assert "end" in output
    assert credential not in output and "second's own" not in output


def test_a_dead_idle_process_is_replaced_and_the_setting_at_zero_stops_them(
        pool, settings, openai_provider, session_dirs, model_server):
    first = _session()
    model_server.script(Text("cold"))
    services.post_message(first.pk, "hello")
    assert run_host(first.pk) == "slept"
    _idle(pool, 1)
    died = next(s for slots in pool._idle.values() for s in slots)
    os.killpg(died.adapter.proc.pid, signal.SIGKILL)  # a process dies while idle: replaced
    wait_for(lambda: pool.counts()["started"] == 2 and pool.counts()["idle"] == 1,
             timeout=120)
    wait_for(lambda: not died.state_dir.exists(), timeout=30)
    idle = [s for slots in pool._idle.values() for s in slots]
    tags = [s.adapter.tag for s in idle]
    held = list(RuntimeIdentity.objects.filter(session__isnull=True).values_list(
        "slot", flat=True))
    settings.AMUX_SESSION_WARM_POOL = 0
    pool.kick()
    _idle(pool, 0)
    wait_for(lambda: not any(tagged_pids(t) for t in tags), timeout=30)
    wait_for(lambda: not RuntimeIdentity.objects.filter(slot__in=held,
                                                        session__isnull=True).exists())
    wait_for(lambda: not any(s.workdir.exists() or s.state_dir.exists() for s in idle),
             timeout=30)
