"""Capacity: a runtime worker as `amux run` starts it (one process, Celery's thread pool, a
thread per awake session) keeps many sessions awake at once, each with its real Codex
runtime; a session that finds every slot held says "waiting for capacity" — and so does the
ticket it works for — and starts the moment a slot frees."""

from __future__ import annotations

import time

import pytest

from runtimes.base import tagged_pids
from sessions import capacity, services
from sessions.models import Session, TimelineEvent
from sessions.new_session import Launch
from tests.integration.test_metrics import SCRAPER, figure, scrape
from tests.support.model_server import Text
from tests.support.workers import Worker, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]


def _completed(session_id) -> int:
    return TimelineEvent.objects.filter(session_id=session_id, type="turn.completed").count()


def _awake(ids) -> set[int]:
    return {s.pk for s in Session.objects.filter(pk__in=ids) if services.lease_alive(s)}


def _slots() -> int:
    return capacity.room().slots


def test_ten_sessions_start_their_first_turn_without_waiting_for_one_to_sleep(
        openai_provider, session_dirs, model_server, tmp_path):
    purge_queues()
    env = worker_env(session_dirs)
    model_server.script(*[Text(f"done {i}") for i in range(10)])
    sessions = [services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                      model="gpt-5.5")) for _ in range(10)]
    worker = Worker("runtime", env, queues="runtime", sessions=12, log=tmp_path / "w.log")
    try:
        wait_for(lambda: _slots() == 12, timeout=60)
        started = time.monotonic()
        for session in sessions:
            services.post_message(session.pk, "say done")
        # every first turn reaches the model, and ends, while all ten stay awake (idle
        # timeout 300 s): none waited for another to fall asleep
        model_server.wait_for_requests(10, timeout=120)
        first_requests = time.monotonic() - started
        ids = [s.pk for s in sessions]
        wait_for(lambda: all(_completed(i) == 1 for i in ids), timeout=120)
        assert _awake(ids) == set(ids), worker.log()[-3000:]
        rows = list(Session.objects.filter(pk__in=ids))
        assert all(s.lifecycle == "idle" and tagged_pids(s.runtime_tag) for s in rows)
        assert len({s.lease_owner for s in rows}) == 10  # one host each, one process
        assert len({s.lease_owner.split(":")[1] for s in rows}) == 1
        assert first_requests < 90
    finally:
        worker.stop()
    tags = [s.runtime_tag for s in rows]
    wait_for(lambda: not any(tagged_pids(t) for t in tags), timeout=20)


def test_a_full_machine_says_waiting_for_capacity_until_a_slot_frees(
        openai_provider, session_dirs, model_server, tmp_path, api, client, settings):
    from intake.models import Source, Thread
    from tickets.models import Assignment, Ticket
    from tickets.read import stages

    purge_queues()
    settings.AMUX_METRICS_TOKEN = SCRAPER["HTTP_AUTHORIZATION"].split()[1]
    env = worker_env(session_dirs)
    model_server.script(Text("first"), Text("second"))
    holder = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                   model="gpt-5.5"))
    waiting = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    source = Source.objects.create(kind="github", slug="gh", name="GitHub")
    thread = Thread.objects.create(source=source, key="o/r#1")
    ticket = Ticket.objects.create(short_name="fix-1", title="Fix", thread=thread,
                                   session=waiting)
    Assignment.objects.create(ticket=ticket, state="running")
    worker = Worker("runtime", env, queues="runtime", sessions=1, log=tmp_path / "w.log")
    try:
        wait_for(lambda: _slots() == 1, timeout=60)
        services.post_message(holder.pk, "hold the slot")
        wait_for(lambda: _completed(holder.pk) == 1, timeout=90)
        assert _awake([holder.pk]) == {holder.pk}  # awake, idle, holding the only slot
        services.post_message(waiting.pk, "my turn?")
        # its host task waits in the broker; the session and its ticket say why
        assert capacity.room().full
        assert capacity.waiting_for_capacity([waiting.pk, holder.pk]) == {waiting.pk}
        assert figure(scrape(client), "amux_sessions_waiting_for_capacity",
                      runtime="codex") == 1
        assert api.get(f"/api/v1/sessions/{waiting.pk}").json()["waiting_for_capacity"]
        shown = api.get(f"/api/v1/tickets/{ticket.pk}").json()
        assert shown["stage"] == "waiting_for_capacity"
        stage, label = stages([Ticket.objects.get(pk=ticket.pk)])[ticket.pk]
        assert stage == "waiting_for_capacity" and "capacity" in label.lower()
        time.sleep(3)
        assert _completed(waiting.pk) == 0 and len(model_server.tool_requests()) == 1
        services.sleep(holder.pk)  # room frees: the waiting session starts at once
        wait_for(lambda: _completed(waiting.pk) == 1, timeout=90)
        assert capacity.waiting_for_capacity([waiting.pk]) == set()
        assert figure(scrape(client), "amux_sessions_waiting_for_capacity",
                      runtime="codex") == 0
        assert not api.get(f"/api/v1/sessions/{waiting.pk}").json()["waiting_for_capacity"]
        stage, _label = stages([Ticket.objects.get(pk=ticket.pk)])[ticket.pk]
        assert stage == "working"
        held = Session.objects.get(pk=holder.pk)
        assert held.lifecycle == "sleeping" and held.sleep_reason == "manual"
        assert not tagged_pids(held.runtime_tag or "none")
    finally:
        worker.stop()
