"""Celery owns runtime processes: a worker killed with SIGKILL mid-turn, then the same
native Codex thread resumed by another worker (woken by the beat's sweep), the interrupted
turn reconciled to exactly one terminal event and continued, and no runtime process left
behind."""

from __future__ import annotations

import pytest

from runtimes.base import tagged_pids
from sessions import services
from sessions.models import Session, TimelineEvent, Turn
from sessions.new_session import Launch
from tests.support.model_server import Text
from tests.support.workers import Worker, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]


def _terminals(session_id):
    return list(TimelineEvent.objects.filter(
        session_id=session_id, type__in=["turn.completed", "turn.failed", "turn.cancelled"])
        .order_by("seq").values_list("turn__seq", "type", "payload"))


def test_killed_worker_mid_turn_resumes_on_another_worker(openai_provider, session_dirs,
                                                          model_server, tmp_path):
    purge_queues()
    env = worker_env(session_dirs, AMUX_SESSION_LEASE_SECONDS="4")
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    model_server.script(Text("never arrives", delay=120), Text("back again"))
    first = Worker("first", env, log=tmp_path / "first.log")
    second = None
    tags = []
    try:
        services.post_message(session.pk, "remember the word pelican")
        model_server.wait_for_requests(1, timeout=90)
        running = Session.objects.get(pk=session.pk)
        assert running.lifecycle == "running" and running.runtime_tag
        native, tags = running.native_ref, [running.runtime_tag]
        assert tagged_pids(running.runtime_tag)
        first.kill()  # SIGKILL the whole worker, mid-turn
        first.proc.wait(10)
        wait_for(lambda: not tagged_pids(tags[0]), timeout=10)  # died with its worker
        second = Worker("second", env, beat=True, log=tmp_path / "second.log")
        # the lease expires, the beat's sweep starts a host on the second worker
        wait_for(lambda: _terminals(session.pk), timeout=90)
        resumed = wait_for(lambda: (s := Session.objects.get(pk=session.pk)).lease_owner
                           and s.runtime_tag not in tags and s, timeout=60)
        tags.append(resumed.runtime_tag)
        assert resumed.native_ref == native
        services.post_message(session.pk, "what was the word?")
        wait_for(lambda: len(_terminals(session.pk)) == 3, timeout=90)
    finally:
        for w in (first, second):
            if w is not None:
                w.stop()
    terminals = _terminals(session.pk)
    # The host's death cut turn 1 short (amux's fault, not the agent's): it ended cancelled
    # and its input was queued again as turn 2, a continuation, before the next message.
    assert [(t[0], t[1]) for t in terminals] == [
        (1, "turn.cancelled"), (2, "turn.completed"), (3, "turn.completed")]
    assert terminals[0][2]["reason"] == "host_lost"
    assert Turn.objects.get(session=session, seq=1).state == "cancelled"
    resumed_turn = Turn.objects.get(session=session, seq=2)
    assert resumed_turn.key.endswith(":resumed")
    assert "remember the word pelican" in resumed_turn.input["text"]
    assert "pelican" in str(model_server.tool_requests()[-1].body)
    wait_for(lambda: not any(tagged_pids(t) for t in tags), timeout=15)
