"""Native goals against the real Codex app-server driven by the scripted model: the host
carries out goal commands natively, admits each continuation the runtime starts as a
canonical turn of its own (one terminal each), refuses what nobody authorized, lets
ordinary input go first and resumes the goal after it."""

from __future__ import annotations

import threading
import time

import pytest

from sessions import control, native_goals, services
from sessions.models import Session, SessionGoal, TimelineEvent, Turn
from sessions.new_session import Launch
from tests.support.model_server import Text, ToolCall
from tests.support.sessions import run_host, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]

GOAL_MARK = 'codex_internal_context source="goal"'
TERMINALS = ("turn.completed", "turn.failed", "turn.cancelled")
WEB = {"via": "web", "actor": "alice"}


class Responder:
    """Goal turns answer slowly (so a pause lands mid-goal); after ``complete_after`` goal
    turns of an objective the model marks it complete; user messages get a plain answer;
    ``create_goal`` in a user turn makes the model start a goal of its own."""

    def __init__(self):
        self.complete_after: int | None = None
        self.goal_requests = 0
        self.user_texts: list[str] = []
        self.model_creates_goal = False
        self.goal_delay = 0.4

    def __call__(self, body):
        items = body.get("input") or []
        last = items[-1] if items else {}
        if last.get("type") == "function_call_output":
            return Text("noted")
        text = str(last.get("content"))
        if GOAL_MARK in text:
            self.goal_requests += 1
            if self.complete_after is not None and self.goal_requests >= self.complete_after:
                self.complete_after = None
                return ToolCall("", tool="update_goal", arguments={"status": "complete"})
            return Text("goal step", delay=self.goal_delay)
        self.user_texts.append(text)
        if self.model_creates_goal:
            self.model_creates_goal = False
            return ToolCall("", tool="create_goal", arguments={"objective": "my own idea"})
        return Text("answer for the user")


def _host(session_id):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("outcome",
                                                                run_host(session_id)),
                              daemon=True)
    thread.start()
    return thread


def _stop(session_id, thread):
    control.send(session_id, "archive")
    Session.objects.filter(pk=session_id).update(lifecycle="archived")
    thread.join(60)


def _goal_turns(session_id):
    return list(Turn.objects.filter(session_id=session_id, input__command="goal")
                .order_by("seq"))


def _ended_goal_turns(session_id):
    return [t for t in _goal_turns(session_id) if t.state in ("completed", "cancelled",
                                                                "failed")]


def _row(session_id) -> SessionGoal:
    return SessionGoal.objects.get(session_id=session_id)


def _status(session_id):
    row = SessionGoal.objects.filter(session_id=session_id).first()
    return (row.snapshot or {}).get("status") if row and row.snapshot else None


def _started_codex(model_server, session_dirs):
    responder = Responder()
    model_server.responder = responder
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=600)
    turn = services.post_message(session.pk, "hello", origin=WEB)
    thread = _host(session.pk)
    wait_for(lambda: Turn.objects.get(pk=turn.pk).state == "completed", timeout=90)
    wait_for(lambda: Session.objects.get(pk=session.pk).runtime_facts.get("goals") is True)
    return session, responder, thread


def _settled(session_id, quiet: float = 1.5) -> int:
    """The number of goal turns once it has stopped changing and none runs (a turn the
    runtime started is adopted a moment after it started)."""
    def snapshot():
        return (len(_goal_turns(session_id)),
                Turn.objects.filter(session_id=session_id,
                                    state__in=["queued", "running"]).exists())

    last, since = snapshot(), time.monotonic()
    deadline = since + 60
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = snapshot()
        if now != last:
            last, since = now, time.monotonic()
        elif not now[1] and time.monotonic() - since >= quiet:
            return now[0]
    raise TimeoutError("goal turns did not settle")


def _story(session_id):
    return [(e.seq, e.turn.seq if e.turn else None, e.type,
             (e.payload.get("goal") or {}).get("status"), e.payload.get("command"),
             e.payload.get("reason"))
            for e in TimelineEvent.objects.filter(session_id=session_id).exclude(
                type__in=["message.delta", "usage"]).select_related("turn").order_by("seq")]


def _one_terminal_each(session_id, turns):
    """Each ended turn has exactly one terminal event (a running one has none yet)."""
    for turn in turns:
        if turn.state in ("queued", "running"):
            continue  # (as read: it may end meanwhile)
        ends = TimelineEvent.objects.filter(turn=turn, type__in=TERMINALS).count()
        assert ends == 1, (turn.seq, turn.state, ends)


def test_goal_lifecycle_on_codex(api, openai_provider, session_dirs, model_server):
    session, responder, thread = _started_codex(model_server, session_dirs)
    sid = session.pk
    try:
        # the capability comes from the running app-server's thread/goal/get
        assert api.get(f"/api/v1/sessions/{sid}/").json()["goal"] is None

        # create: no turn for the command; the goal runs as continuation turns
        outcome = services.post_message(sid, "goal write the release notes", origin=WEB)
        assert isinstance(outcome, dict) and outcome["command"] == "create"
        assert outcome["location"] == WEB and "refused" not in outcome
        key = outcome["goal_key"]
        assert not Turn.objects.filter(session_id=sid,
                                       input__text__startswith="goal ").exists()
        wait_for(lambda: len(_ended_goal_turns(sid)) >= 2, timeout=60)
        goal_turns = _ended_goal_turns(sid)
        _one_terminal_each(sid, goal_turns)
        assert all(t.origin["via"] == "goal" for t in goal_turns)
        assert all(t.input["text"] == "write the release notes" for t in goal_turns)
        queued = TimelineEvent.objects.filter(turn=goal_turns[0], type="turn.queued").get()
        assert queued.payload["origin"]["via"] == "goal"
        started = TimelineEvent.objects.filter(turn=goal_turns[0], type="turn.started").get()
        assert started.provenance.get("native_turn_id")  # the runtime's own turn
        assert TimelineEvent.objects.filter(turn=goal_turns[0],
                                            type="message.completed").exists()

        # status: native state, usage and time (the runtime reports a goal's usage after
        # the turn that spent it has ended, so it is read once that report is in)
        wait_for(lambda: (SessionGoal.objects.get(session_id=sid).snapshot or {}).get(
            "tokensUsed", 0) > 0, timeout=30)
        status = services.post_message(sid, "goal", origin={"via": "web", "actor": "bob"})
        assert status["goal"]["objective"] == "write the release notes"
        assert status["goal"]["status"] == "active"
        assert status["goal"]["tokens_used"] > 0
        assert status["location"] == WEB  # asking elsewhere does not move the output
        detail = api.get(f"/api/v1/sessions/{sid}/").json()["goal"]
        assert detail["goal_key"] == key and detail["goal"]["status"] == "active"

        # an unfinished goal is never replaced implicitly
        refused = services.post_message(sid, "goal something else", origin=WEB)
        assert "goal set" in refused["refused"] and _row(sid).objective == \
            "write the release notes"

        # pause: the authorization goes first, then the native goal pauses
        paused = services.post_message(sid, "goal pause", origin=WEB)
        assert paused["command"] == "pause" and _row(sid).authorized is False
        wait_for(lambda: _status(sid) == "paused", timeout=30)
        wait_for(lambda: not Turn.objects.filter(session_id=sid, state="running").exists())
        count = len(_goal_turns(sid))
        time.sleep(2)
        assert len(_goal_turns(sid)) == count  # nothing continues while paused
        _one_terminal_each(sid, _goal_turns(sid))

        # resume
        resumed = services.post_message(sid, "goal resume", origin=WEB)
        assert "refused" not in resumed, resumed
        assert _row(sid).authorized is True
        wait_for(lambda: len(_ended_goal_turns(sid)) >= count + 1, timeout=60)

        # budget: a clear refusal for a bad one, the native budget for a good one
        bad = services.post_message(sid, "goal budget lots", origin=WEB)
        assert "positive whole number" in bad["refused"]
        services.post_message(sid, "goal budget 987654321", origin=WEB)
        wait_for(lambda: (_row(sid).snapshot or {}).get("tokenBudget") == 987654321)

        # ordinary input preempts; the goal keeps its authorization and resumes after
        user_turn = services.post_message(sid, "what is 2+2?", origin=WEB)
        assert isinstance(user_turn, Turn)
        wait_for(lambda: Turn.objects.get(pk=user_turn.pk).state == "completed", timeout=60)
        assert any("what is 2+2?" in t for t in responder.user_texts)
        assert _row(sid).authorized is True
        wait_for(lambda: any(t.seq > user_turn.seq for t in _ended_goal_turns(sid)),
                 timeout=60)
        _one_terminal_each(sid, Turn.objects.filter(session_id=sid))

        # REST: a bad command is a 400 naming the field; a good one answers the outcome
        response = api.post(f"/api/v1/sessions/{sid}/goal/", {"command": "goal budget -3"},
                            format="json")
        assert response.status_code == 400
        assert response.json()["error"]["fields"] == {"command": [
            "goal budget needs a positive whole number of tokens, e.g. goal budget 200000"]}
        response = api.post(f"/api/v1/sessions/{sid}/goal/", {"command": "status"},
                            format="json")
        assert response.status_code == 200 and response.json()["goal"]["goal_key"] == key

        # clear: authorization and output location go, the history stays
        turns_before = Turn.objects.filter(session_id=sid).count()
        cleared = services.post_message(sid, "goal clear", origin=WEB)
        assert cleared["command"] == "clear"
        row = _row(sid)
        assert (row.authorized, row.location, row.goal_key) == (False, None, "")
        wait_for(lambda: TimelineEvent.objects.filter(session_id=sid,
                                                      type="goal.cleared").exists())
        wait_for(lambda: not Turn.objects.filter(session_id=sid, state="running").exists())
        time.sleep(1.5)
        after = Turn.objects.filter(session_id=sid).count()
        assert after >= turns_before and after - turns_before <= 1  # at most the one cut
        assert Turn.objects.filter(session_id=sid, seq=1, state="completed").exists()
        assert api.get(f"/api/v1/sessions/{sid}/").json()["goal"] is None
        assert services.post_message(sid, "goal pause", origin=WEB)["refused"]

        # complete: the model ends the goal; it is never resumed by itself
        responder.complete_after = responder.goal_requests + 2
        lark = {"via": "lark", "actor": "ou_1", "conversation": 7}
        created = services.post_message(sid, "goal tidy the changelog", origin=lark)
        assert created["goal_key"] != key and created["location"] == lark
        wait_for(lambda: _status(sid) == "complete", timeout=60)
        count = _settled(sid)
        services.post_message(sid, "thanks", origin=WEB)  # input after: no auto resume
        wait_for(lambda: Turn.objects.filter(session_id=sid, state="queued").count() == 0
                 and not Turn.objects.filter(session_id=sid, state="running").exists())
        time.sleep(1.5)
        assert len(_goal_turns(sid)) == count and _status(sid) == "complete", _story(sid)
        assert "complete" in services.post_message(sid, "goal resume", origin=WEB)["refused"]

        # goal set replaces: a new identity, the output moves, the generation grows
        generation = _row(sid).generation
        replaced = services.post_message(sid, "goal set a new objective", origin=WEB)
        assert replaced["goal_key"] != created["goal_key"] and replaced["location"] == WEB
        assert _row(sid).generation == generation + 1
        wait_for(lambda: (_row(sid).snapshot or {}).get("objective") == "a new objective")
        services.post_message(sid, "goal pause", origin=WEB)
        wait_for(lambda: _status(sid) == "paused", timeout=30)
        _one_terminal_each(sid, Turn.objects.filter(session_id=sid))
        # a continuation the runtime started as a pause or clear landed was refused, and
        # is no turn: every goal turn belongs to an authorized goal
        refused = set(TimelineEvent.objects.filter(
            session_id=sid, type="goal.continuation_refused").values_list(
            "payload__native_turn_id", flat=True))
        adopted = set(TimelineEvent.objects.filter(
            session_id=sid, type="turn.started", turn__input__command="goal").values_list(
            "provenance__native_turn_id", flat=True))
        assert not refused & adopted
    finally:
        _stop(sid, thread)


def test_budget_limited_goal_is_not_resumed(openai_provider, session_dirs, model_server):
    session, responder, thread = _started_codex(model_server, session_dirs)
    sid = session.pk
    try:
        services.post_message(sid, "goal count the stars", origin=WEB)
        wait_for(lambda: len(_ended_goal_turns(sid)) >= 1, timeout=60)
        services.post_message(sid, "goal budget 1", origin=WEB)
        wait_for(lambda: _status(sid) == "budgetLimited", timeout=60)
        count = _settled(sid)
        # a prompt no person typed is never a command, even one that reads like it
        user_turn = services.post_message(sid, "goal more stars", origin={"via": "schedule"})
        assert isinstance(user_turn, Turn)
        assert isinstance(services.post_message(sid, "goal even more"), Turn)
        wait_for(lambda: Turn.objects.get(pk=user_turn.pk).state == "completed", timeout=60)
        wait_for(lambda: any("goal even more" in t for t in responder.user_texts), timeout=60)
        time.sleep(1.5)
        assert len(_goal_turns(sid)) == count and _status(sid) == "budgetLimited"
    finally:
        _stop(sid, thread)


def test_every_goal_command_sent_while_goal_turns_follow_each_other_is_answered(
        openai_provider, session_dirs, model_server):
    """Short goal turns, one after another, and budget commands meanwhile: each command is
    carried out and recorded, whether it reached a goal turn, the gap between two, or both
    (a turn's control reader used to be cancelled at the turn's end, dropping a command it
    had already taken while it stored the goal's reports)."""
    session, responder, thread = _started_codex(model_server, session_dirs)
    sid = session.pk
    responder.goal_delay = 0.05
    budgets = [1_000_000_000 + n for n in range(25)]
    try:
        services.post_message(sid, "goal count the sheep", origin=WEB)
        wait_for(lambda: len(_ended_goal_turns(sid)) >= 2, timeout=60)
        for budget in budgets:
            assert not isinstance(services.post_message(sid, f"goal budget {budget}",
                                                        origin=WEB), Turn)
            time.sleep(0.03)

        def answered():
            return [e.payload["goal"]["token_budget"] for e in TimelineEvent.objects.filter(
                session_id=sid, type="goal.updated", payload__command="budget")]

        wait_for(lambda: len(answered()) >= len(budgets), timeout=60)
        assert sorted(answered()) == budgets
        assert _row(sid).snapshot["tokenBudget"] == budgets[-1]
        _one_terminal_each(sid, _goal_turns(sid))
    finally:
        _stop(sid, thread)


def test_a_goal_nobody_authorized_is_refused(openai_provider, session_dirs, model_server):
    """The model creates a goal itself (create_goal): Codex starts continuations, the host
    interrupts each and records it; none is anyone's turn."""
    session, responder, thread = _started_codex(model_server, session_dirs)
    sid = session.pk
    try:
        responder.model_creates_goal = True
        turn = services.post_message(sid, "do the usual", origin=WEB)
        wait_for(lambda: Turn.objects.get(pk=turn.pk).state == "completed", timeout=60)
        wait_for(lambda: TimelineEvent.objects.filter(
            session_id=sid, type="goal.continuation_refused").exists(), timeout=30)
        refused = TimelineEvent.objects.filter(session_id=sid,
                                               type="goal.continuation_refused").first()
        assert refused.payload["reason"] in ("unauthorized", "during_input")
        assert refused.turn_id is None
        wait_for(lambda: _status(sid) == "paused", timeout=30)
        time.sleep(1)
        assert _goal_turns(sid) == []
        assert _row(sid).authorized is False
        _one_terminal_each(sid, Turn.objects.filter(session_id=sid))
    finally:
        _stop(sid, thread)


def test_pi_session_has_no_goals(api, client, operator, openai_provider, session_dirs,
                                 model_server):
    """Pi declares no goal feature: `goal x` (and a bare `goal`) is ordinary text for the
    model, and the session page shows no goal help."""
    session = services.create_session(Launch.direct(runtime="pi", provider="scripted",
                                                    model="scripted-model"))
    response = api.post(f"/api/v1/sessions/{session.pk}/goal/", {"command": "goal x"},
                        format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "goal_unsupported"
    model_server.script(Text("ordinary answer"), Text("second answer"), Text("third answer"))
    # a new session's runtime has not said yet whether it has goals: the host decides
    outcome = services.post_message(session.pk, "goal write docs", origin=WEB)
    assert outcome["deferred"] is True and not Turn.objects.filter(session=session).exists()
    thread = _host(session.pk)
    try:
        turn = wait_for(lambda: Turn.objects.filter(session_id=session.pk).first(), timeout=90)
        wait_for(lambda: Turn.objects.get(pk=turn.pk).state == "completed", timeout=90)
        assert turn.input["text"] == "goal write docs" and turn.origin["goal_deferred"]
        assert "goal write docs" in str(model_server.tool_requests()[-1].body)
        facts = Session.objects.get(pk=session.pk).runtime_facts
        assert facts.get("goals") is False
        # declared now: `goal …` is ordinary text at once
        again = services.post_message(session.pk, "goal more docs", origin=WEB)
        assert isinstance(again, Turn)
        wait_for(lambda: Turn.objects.get(pk=again.pk).state == "completed", timeout=90)
        assert api.get(f"/api/v1/sessions/{session.pk}/").json()["goal"] is None
        assert not SessionGoal.objects.filter(session_id=session.pk).exists()
        # no help anywhere: a bare `goal` is a turn for the model, not a status card
        bare = services.post_message(session.pk, "goal", origin=WEB)
        assert isinstance(bare, Turn)
        wait_for(lambda: Turn.objects.get(pk=bare.pk).state == "completed", timeout=90)
        assert not TimelineEvent.objects.filter(session_id=session.pk,
                                                type__startswith="goal.").exists()
        client.force_login(operator)
        page = client.get(f"/panel/sessions/{session.pk}/")
        assert page.status_code == 200 and 'id="message-form"' in page.content.decode()
        assert 'id="goal-help"' not in page.content.decode()
        assert "goal budget" not in page.content.decode()
    finally:
        _stop(session.pk, thread)


def test_card_actions_recheck_the_goal(openai_provider, session_dirs, model_server):
    """A goal card's button controls only the goal it was made for: after `goal set`, the
    old card is refused and the new one pauses and clears the running goal natively.
    (The handler is called directly here; a click through the signed endpoint is
    ``tests/integration/conversations/test_goal_cards.py``.)"""
    from conversations import goal_control

    session, responder, thread = _started_codex(model_server, session_dirs)
    sid = session.pk
    try:
        old = services.post_message(sid, "goal first objective", origin=WEB)
        wait_for(lambda: len(_ended_goal_turns(sid)) >= 1, timeout=60)
        lark = {"via": "lark", "actor": "ou_2", "conversation": 4}
        new = services.post_message(sid, "goal set second objective", origin=lark)
        value = {"conversation": 4, "session": sid, "gen": 1}
        with pytest.raises(native_goals.GoalRefused) as stale:
            goal_control.control("goal.pause", {**value, "goal_key": old["goal_key"]},
                                 operator="ou_2")
        assert stale.value.code == "stale_goal"
        assert _row(sid).authorized is True and _row(sid).location == lark
        wait_for(lambda: (_row(sid).snapshot or {}).get("objective") == "second objective")
        toast = goal_control.control("goal.pause", {**value, "goal_key": new["goal_key"]},
                                     operator="ou_2")
        assert toast.startswith("Goal paused")
        assert _row(sid).authorized is False
        wait_for(lambda: _status(sid) == "paused", timeout=30)
        with pytest.raises(native_goals.GoalRefused):  # nothing to pause twice
            goal_control.control("goal.pause", {**value, "goal_key": new["goal_key"]},
                                 operator="ou_2")
        goal_control.control("goal.resume", {**value, "goal_key": new["goal_key"]},
                             operator="ou_2")
        wait_for(lambda: _status(sid) == "active", timeout=30)
        goal_control.control("goal.clear", {**value, "goal_key": new["goal_key"]},
                             operator="ou_2")
        wait_for(lambda: TimelineEvent.objects.filter(session_id=sid,
                                                      type="goal.cleared").exists())
        with pytest.raises(native_goals.GoalRefused) as gone:
            goal_control.control("goal.resume", {**value, "goal_key": new["goal_key"]},
                                 operator="ou_2")
        assert gone.value.code == "stale_goal"
        _settled(sid)
        _one_terminal_each(sid, Turn.objects.filter(session_id=sid))
    finally:
        _stop(sid, thread)


def test_an_explicit_interrupt_revokes_the_goal(openai_provider, session_dirs, model_server):
    session, responder, thread = _started_codex(model_server, session_dirs)
    sid = session.pk
    try:
        services.post_message(sid, "goal keep polishing", origin=WEB)
        running = wait_for(lambda: Turn.objects.filter(
            session_id=sid, state="running", input__command="goal").first(), timeout=60)
        services.interrupt(sid)
        wait_for(lambda: Turn.objects.get(pk=running.pk).state == "cancelled", timeout=30)
        wait_for(lambda: _status(sid) == "paused", timeout=30)
        assert _row(sid).authorized is False
        count = _settled(sid)
        time.sleep(1)
        assert len(_goal_turns(sid)) == count
        assert services.post_message(sid, "goal resume", origin=WEB)["command"] == "resume"
        wait_for(lambda: len(_ended_goal_turns(sid)) > count, timeout=60)
    finally:
        _stop(sid, thread)


def test_a_new_sessions_first_goal_waits_for_the_runtime_to_declare_goals(
        openai_provider, session_dirs, model_server):
    """`goal <text>` as a new session's first words (a Lark topic opened with a goal): no
    turn is made for the text; once Codex has started and answered thread/goal/get, the
    goal is created as if typed then, and runs."""
    responder = Responder()
    model_server.responder = responder
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    sid = session.pk
    Session.objects.filter(pk=sid).update(idle_timeout_s=600)
    outcome = services.post_message(sid, "goal write the changelog", origin=WEB)
    assert outcome["deferred"] is True and outcome["command"] == "create"
    thread = _host(sid)
    try:
        wait_for(lambda: SessionGoal.objects.filter(session_id=sid, authorized=True).exists(),
                 timeout=90)
        assert _row(sid).objective == "write the changelog" and _row(sid).location == WEB
        wait_for(lambda: len(_ended_goal_turns(sid)) >= 1, timeout=60)
        assert not Turn.objects.filter(session_id=sid, input__text__startswith="goal ").exists()
        services.post_message(sid, "goal pause", origin=WEB)
        wait_for(lambda: _status(sid) == "paused", timeout=30)
    finally:
        _stop(sid, thread)
