"""Managed turns (loopx_turn_v0) with the real Pi against the scripted model server: the
REST call records the envelope, the supervisor's step function (goals.turns.advance, what
the ``goals.turn`` task runs) posts the todo into the working session, the real session
host runs Pi's turn, and amux's own check decides the writeback and the spend."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client

from goals import turns
from goals.models import GoalTurn
from sessions.models import Turn
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(120)]

TURNS = "/api/v1/goals/ship/agents/builder/turns/"


def check(api, command):
    response = api.patch("/api/v1/goals/ship/", {"check_command": command})
    assert response.status_code == 200, response.content


def todo(api, title):
    response = api.post("/api/v1/goals/ship/todos/", {"title": title})
    assert response.status_code == 201
    return response.json()["id"]


def drive(key, session_id):
    """What the supervisor task does for one envelope, with the host run in this process."""
    pk = GoalTurn.objects.get(key=key).pk
    assert turns.advance(pk).state == "running"
    assert run_host(session_id) == "slept"
    return turns.advance(pk)


def session_turns(session_id):
    return Turn.objects.filter(session_id=session_id).count()


def panel_row(user, key):
    """The turn's row on the goal page (Sessions → Goals → the goal)."""
    client = Client()
    client.force_login(user)
    html = client.get("/panel/sessions/goals/ship/").content.decode()
    start = html.index(f'data-turn="{key}"')
    return html[start:html.index("</tr>", start)]


def test_a_passing_turn_marks_the_todo_done_and_spends_one(api, session_id, model_server,
                                                           operator):
    check(api, "test -f done.txt && cat done.txt")
    first = todo(api, "write done.txt")
    todo(api, "then the notes")
    model_server.script(ToolCall("echo shipped > done.txt"), Text("wrote done.txt"))
    posted = api.post(TURNS, {"key": "t1"})
    assert posted.status_code == 202, posted.content
    body = posted.json()
    assert (body["state"], body["todo"], body["hint"]) == ("queued", first, "")
    assert api.get(f"/api/v1/goals/ship/todos/{first}/").json()["claimed_by"] == "builder"
    assert drive("t1", session_id).state == "done"
    result = api.get(TURNS + "t1/")
    assert result.status_code == 200
    body = result.json()
    assert body["validation"]["passed"] is True and "shipped" in body["validation"]["output"]
    assert body["writeback"] == {"accepted": True, "todo": first, "todo_state": "done"}
    assert (body["quota_spent"], body["hint"]) == (1, "continue")
    assert body["session_turn"] == "loopx-t1" and body["attempt"]["turn_state"] == "completed"
    done = api.get(f"/api/v1/goals/ship/todos/{first}/").json()
    assert done["state"] == "done" and "loopx turn t1" in done["evidence"]
    assert "shipped" in done["evidence"]
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 1
    # Pi saw the todo in its own session: the message the supervisor posted
    prompt = Turn.objects.get(session_id=session_id, key="loopx-t1").input["text"]
    assert "write done.txt" in prompt and "test -f done.txt" in prompt
    listed = api.get(TURNS).json()
    assert [t["key"] for t in listed["results"]] == ["t1"]
    row = panel_row(operator, "t1")
    assert ">passed<" in row and ">continue<" in row and 'class="spent">1<' in row


def test_a_failing_check_keeps_the_todo_and_spends_nothing(api, session_id, model_server,
                                                           operator):
    check(api, "test -f done.txt")
    first = todo(api, "write done.txt")
    model_server.script(Text("I think it is done"))  # the agent's word, and no file
    api.post(TURNS, {"key": "t1"})
    assert drive("t1", session_id).state == "done"
    body = api.get(TURNS + "t1/").json()
    assert body["validation"]["passed"] is False and body["validation"]["exit_code"] == 1
    assert body["writeback"]["todo_state"] == "claimed"
    assert (body["quota_spent"], body["hint"], body["reason"]) == (
        0, "replan", "validation_failed")
    kept = api.get(f"/api/v1/goals/ship/todos/{first}/").json()
    assert (kept["state"], kept["claimed_by"], kept["evidence"]) == ("claimed", "builder", "")
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 0
    row = panel_row(operator, "t1")
    assert ">failed<" in row and ">replan<" in row and 'class="spent">0<' in row


def test_the_same_key_twice_is_one_attempt_one_writeback_one_spend(api, session_id,
                                                                   model_server):
    check(api, "test -f done.txt")
    first = todo(api, "write done.txt")
    model_server.script(ToolCall("touch done.txt"), Text("done"))
    api.post(TURNS, {"key": "same"})
    again_in_flight = api.post(TURNS, {"key": "same"})
    assert again_in_flight.status_code == 202 and again_in_flight.json()["state"] == "queued"
    drive("same", session_id)
    replay = api.post(TURNS, {"key": "same"})
    assert replay.status_code == 200
    assert replay.json() == api.get(TURNS + "same/").json()
    assert turns.advance(GoalTurn.objects.get(key="same").pk).state == "done"
    assert session_turns(session_id) == 1
    assert GoalTurn.objects.count() == 1
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 1
    assert api.get(f"/api/v1/goals/ship/todos/{first}/").json()["state"] == "done"


def test_a_second_turn_while_one_is_in_flight_answers_409(api, session_id):
    check(api, "true")
    todo(api, "one")
    todo(api, "two")
    assert api.post(TURNS, {"key": "a"}).status_code == 202
    second = api.post(TURNS, {"key": "b"})
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "turn_in_flight"
    assert "key" in second.json()["error"]["fields"]
    assert GoalTurn.objects.count() == 1


def test_two_concurrent_posts_make_one_turn(api, session_id, operator):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    check(api, "true")
    todo(api, "one")
    todo(api, "two")
    barrier, codes = threading.Barrier(2), []

    def post(key):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(operator)[1]}")
        barrier.wait()
        codes.append(client.post(TURNS, {"key": key}, format="json").status_code)
        connection.close()

    threads = [threading.Thread(target=post, args=(k,)) for k in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(codes) == [202, 409]
    assert GoalTurn.objects.filter(state="queued").count() == 1


def test_crash_replay_does_not_duplicate_state_writeback_or_quota_spend(api, session_id,
                                                                        model_server):
    """A worker that died after a step committed: the next run resumes after it. Each step
    is run twice, as two supervisors (or a redelivered task) would."""
    from goals.turns import _dispatch, _settle, _validate, _write

    check(api, "test -f done.txt")
    first = todo(api, "write done.txt")
    todo(api, "then the notes")
    model_server.script(ToolCall("touch done.txt"), Text("done"))
    api.post(TURNS, {"key": "c1"})
    turn = GoalTurn.objects.get(key="c1")
    # the post committed but the process died before it could look: the same key again
    # finds the session turn instead of posting a second one
    for _ in range(2):
        _dispatch(GoalTurn.objects.get(pk=turn.pk))
    assert session_turns(session_id) == 1
    assert run_host(session_id) == "slept"
    for step in (_validate, _write):
        for _ in range(2):
            step(GoalTurn.objects.get(pk=turn.pk))
    written = GoalTurn.objects.get(pk=turn.pk)
    assert written.state == "written"  # writeback committed; the spend not yet
    evidence = api.get(f"/api/v1/goals/ship/todos/{first}/").json()["evidence"]
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 0
    for _ in range(2):
        _settle(GoalTurn.objects.get(pk=turn.pk))
        turns.advance(turn.pk)
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 1
    assert api.get(f"/api/v1/goals/ship/todos/{first}/").json()["evidence"] == evidence
    assert session_turns(session_id) == 1
    body = api.get(TURNS + "c1/").json()
    assert (body["state"], body["quota_spent"], body["hint"]) == ("done", 1, "continue")


def test_the_turn_task_finishes_an_ended_attempt_and_autorun_starts_the_next(
        api, session_id, model_server):
    from goals import tasks

    check(api, "test -f done.txt")
    todo(api, "write done.txt")
    second = todo(api, "and again")
    model_server.script(ToolCall("touch done.txt"), Text("done"))
    api.post(TURNS, {"key": "k1"})
    pk = GoalTurn.objects.get(key="k1").pk
    assert turns.advance(pk).state == "running"
    assert run_host(session_id) == "slept"
    # the real Celery task, run here: the attempt ended, so one run settles the envelope
    assert tasks.run_turn.apply(args=[pk]).get() == "done"
    # not set to run continuously: the supervisor starts nothing
    assert tasks.supervise.apply(kwargs={}).get() == 0
    on = api.post("/api/v1/goals/ship/agents/builder/autorun/", {"autorun": True})
    assert on.status_code == 200 and on.json()["autorun"] is True
    assert tasks.supervise.apply(kwargs={}).get() == 1
    assert tasks.supervise.apply(kwargs={}).get() == 0  # one in flight: no second one
    auto = GoalTurn.objects.get(key=f"auto-after-{pk}")
    assert (auto.state, auto.todo_id) == ("queued", second)


def test_the_gate_skips_without_an_attempt(api, session_id):
    todo(api, "write done.txt")
    check(api, "")
    skipped = api.post(TURNS, {"key": "no-check"})
    assert skipped.status_code == 200
    assert (skipped.json()["state"], skipped.json()["hint"], skipped.json()["reason"]) == (
        "skipped", "replan", "no_check_command")
    check(api, "true")
    api.patch("/api/v1/goals/ship/", {"state": "paused"})
    paused = api.post(TURNS, {"key": "paused"}).json()
    assert (paused["state"], paused["hint"], paused["reason"]) == (
        "skipped", "stop", "goal_paused")
    assert session_turns(session_id) == 0
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 0


def test_turn_refusals_name_the_field(api, session_id):
    check(api, "true")
    bad = api.post(TURNS, {"key": "has space"})
    assert bad.status_code == 400 and "key" in bad.json()["error"]["fields"]
    unknown = api.post(TURNS, {"key": "u1", "todo": 999})
    assert unknown.status_code == 400 and "todo" in unknown.json()["error"]["fields"]
    assert api.get(TURNS + "nope/").status_code == 404
    api.post("/api/v1/goals/ship/agents/builder/detach/")
    detached = api.post(TURNS, {"key": "d1"})
    assert detached.status_code == 409 and detached.json()["error"]["code"] == "no_session"


def run_row(pk):
    """Run the envelope's supervisor row once, as a drainer would (its lease taken here):
    the outcome and the row after it."""
    from django.utils import timezone

    from effects import outbox
    from effects.models import Effect

    rows = Effect.objects.filter(kind=turns.EFFECT_KIND, key=turns.key_of(pk), state="pending")
    rows.update(claimed_by="test-drainer",
                claimed_until=timezone.now() + timedelta(minutes=5))
    outcome = outbox.run_one(rows.get(), "test-drainer")
    return outcome, rows.first()


def test_an_envelope_in_flight_has_its_supervisor_row(api, session_id):
    """Written with the envelope: a worker or a task lost on the way loses nothing."""
    from effects.models import Effect

    check(api, "true")
    todo(api, "one")
    api.post(TURNS, {"key": "lost"})
    turn = GoalTurn.objects.get(key="lost")
    row = Effect.objects.get(kind="goals.turn", key=f"turn:{turn.pk}")
    assert (row.state, row.payload) == ("pending", {"turn": turn.pk})


def test_a_running_attempt_waits_for_its_end_or_its_timeout(api, session_id, settings):
    """Posted, its session turn not ended: the row is due again only at the attempt's
    timeout (nothing looks before; the turn's end makes it due); past the timeout it
    interrupts the attempt."""
    from django.utils import timezone

    check(api, "true")
    todo(api, "one")
    api.post(TURNS, {"key": "w1"})
    pk = GoalTurn.objects.get(key="w1").pk
    outcome, row = run_row(pk)
    assert outcome == "later" and GoalTurn.objects.get(pk=pk).state == "running"
    wait = (row.due_at - timezone.now()).total_seconds()
    assert 1700 < wait <= 1801  # AMUX_GOAL_TURN_TIMEOUT_S, 1800 s by default
    settings.AMUX_GOAL_TURN_TIMEOUT_S = 60
    old = timezone.now() - timedelta(minutes=5)
    GoalTurn.objects.filter(pk=pk).update(dispatched_at=old)
    outcome, row = run_row(pk)
    assert outcome == "later"
    assert (row.due_at - timezone.now()).total_seconds() <= turns.WAKE_FLOOR_S
    assert GoalTurn.objects.get(pk=pk).state == "running"


def test_envelopes_in_flight_before_the_upgrade_get_their_rows(api, session_id):
    """In flight when the supervisor became an outbox row (a chain of tasks drove it): the
    data migration gives each its row; settled ones get none."""
    import importlib

    from django.apps import apps

    from effects.models import Effect

    migration = importlib.import_module("goals.migrations.0010_turn_supervisor_rows")
    check(api, "true")
    todo(api, "one")
    api.post(TURNS, {"key": "old"})
    pk = GoalTurn.objects.get(key="old").pk
    rows = Effect.objects.filter(kind="goals.turn")
    rows.delete()  # as before the upgrade
    migration.supervisor_rows(apps, None)
    migration.supervisor_rows(apps, None)
    assert [(r.key, r.payload) for r in rows.all()] == [(f"turn:{pk}", {"turn": pk})]
    rows.delete()
    GoalTurn.objects.filter(pk=pk).update(state="done")
    migration.supervisor_rows(apps, None)
    assert not rows.exists()
