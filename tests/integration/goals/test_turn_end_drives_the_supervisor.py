"""A managed turn moves on when its session turn ends, not when someone looks again
(issue 31, item 4: events reach every subscriber, goal turns advance on `session.turn_ended`
with no polling loop).

Real Celery workers as `amux run` starts them (a runtime worker hosting the session's real
Pi against the scripted model, a default worker for the supervisor and the outbox), and no
beat: nothing sweeps. The envelope is posted through the REST API; its supervisor (an
outbox row, goals.turn) posts the todo and waits, due again only at the attempt's timeout;
Pi's turn ends; the fact reaches goals through its own outbox row and makes the
supervisor's row due; it sends amux's check to the check task, which hands the envelope
back, settled. The supervisor runs exactly three times and the check task once — a poll
would have run it every few seconds while Pi worked."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache

from effects import outbox
from goals.models import GoalTurn
from tests.support.model_server import Text, ToolCall
from tests.support.workers import amux_workers, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.xdist_group("processes"), pytest.mark.e2e,
              pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

TURNS = "/api/v1/goals/ship/agents/builder/turns/"


@pytest.fixture
def workers(settings, session_id, tmp_path):
    purge_queues()
    cache.delete(outbox.KICK_FLAG)
    started = amux_workers("goals", worker_env(settings.DATA_DIR), sessions=2, logs=tmp_path)
    yield started
    for worker in started:
        worker.stop()
    purge_queues()


def supervisor_runs(log: str) -> int:
    return len(re.findall(r"goals turn \d+ \(ev1\) supervised", log))


def settled_log(worker) -> str | None:
    """The worker's log once its supervisor has seen the envelope settled."""
    log = worker.log()
    return log if re.search(r"goals turn \d+ \(ev1\) supervised: done", log) else None


def check_runs(log: str) -> int:
    return len(re.findall(r"Task goals\.turn\[[^\]]+\] received", log))


def test_the_end_of_the_session_turn_sends_the_envelope_on(api, session_id, model_server,
                                                            workers):
    assert api.patch("/api/v1/goals/ship/", {"check_command": "test -f done.txt"}
                     ).status_code == 200
    todo = api.post("/api/v1/goals/ship/todos/", {"title": "write done.txt"}).json()["id"]
    # the agent works a while: a poll every 2 s would have looked several times
    model_server.script(ToolCall("sleep 6 && touch done.txt"), Text("done"))
    posted = api.post(TURNS, {"key": "ev1"})
    assert posted.status_code == 202, posted.content

    runtime, default = workers
    try:
        turn = wait_for(lambda: GoalTurn.objects.filter(key="ev1", state="done").first(),
                        timeout=150, interval=0.2)
    except TimeoutError:
        pytest.fail(f"the envelope did not settle:\n{runtime.log()[-3000:]}\n"
                    f"{default.log()[-3000:]}")
    assert turn.validation["passed"] is True and turn.quota_spent == 1
    assert api.get(f"/api/v1/goals/ship/todos/{todo}/").json()["state"] == "done"
    # one run posted the todo, one sent the check after the fact arrived, one saw the
    # envelope settled; none in between. The check task settles the envelope and then
    # makes its row due, so the last run comes just after the state reads done.
    try:
        log = wait_for(lambda: settled_log(default), timeout=30, interval=0.2)
    except TimeoutError:
        pytest.fail(f"the settled envelope's row did not run:\n{default.log()[-4000:]}")
    assert supervisor_runs(log) == 3 and check_runs(log) == 1, log[-4000:]
