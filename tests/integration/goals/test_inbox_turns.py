"""The inbox drives itself (issue 32, item 5): a managed agent's async_inbox is drained and
settled in turns of its own, with the real Pi against the scripted model server, a real
Lark mention through the signed webhook and the intake drainer, and the reply read back
from the recording Lark server through lark-oapi. Nobody calls the drain or settle API:
the outbox rows the capture and the turn's end write (goals.inbox_turn) do it all, and a
reply due preempts the supervisor's next ordinary turn."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from effects import outbox
from effects.models import Effect, EffectState
from goals import inbox_turns, turns
from goals.core import inbox_turns as rules
from goals.models import GoalTurn, InboxEvent, Todo
from sessions.models import Turn
from tests.integration.goals.test_inbox_drain import (
    _connector,
    _source,
    mention,
    ordinary,
    replies_in,
)
from tests.support.model_server import Text, ToolCall
from tests.support.recording_server import RecordingServer
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

AGENT = "/api/v1/goals/ship/agents/builder/"


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        yield srv


@pytest.fixture
def connector(api, session_id, lark):
    _source(lark.url)
    return _connector(api)


def drain_outbox(rounds: int = 6) -> None:
    """Run the real drainer until nothing is due (rows that answer Later stay)."""
    for _ in range(rounds):
        outbox.drain(seconds=5)
        if not Effect.objects.filter(state=EffectState.PENDING,
                                     due_at__lte=timezone.now()).exists():
            return


def settle_block(*entries: dict) -> str:
    return "```json\n" + json.dumps({"settle": list(entries)}) + "\n```"


def inbox_turns_of(session_id: int) -> list[Turn]:
    return list(Turn.objects.filter(session_id=session_id,
                                    key__startswith=rules.TURN_PREFIX).order_by("id"))


def test_a_reply_due_preempts_the_next_ordinary_turn_and_the_inbox_settles_itself(
        api, client, session_id, connector, lark, model_server):
    agent_pk = connector.agent_id
    api.patch("/api/v1/goals/ship/", {"check_command": "test -f done.txt"})
    api.post("/api/v1/goals/ship/todos/", {"title": "write done.txt"})
    second = api.post("/api/v1/goals/ship/todos/", {"title": "then the notes"}).json()["id"]
    assert api.post(AGENT + "autorun/", {"autorun": True}).status_code == 200

    # the supervisor's ordinary turn is in flight (its todo posted into the session)
    first = turns.supervise(agent_pk)
    assert turns.advance(first.pk).state == "running"
    model_server.script(ToolCall("touch done.txt"), Text("wrote done.txt"))

    # meanwhile a person asks the bot something, and an ordinary message arrives
    ordinary(connector, "lunch is at noon", "om_lunch")
    asked = mention(client, lark, "can you cut the release today?", "om_ask")
    lane = Effect.objects.get(kind=rules.EFFECT_KIND, key=rules.agent_key(agent_pk))
    assert lane.payload == {"agent": agent_pk}  # written with the capture itself
    drain_outbox()
    assert inbox_turns_of(session_id) == []  # one turn at a time: the ordinary one runs

    assert run_host(session_id) == "slept"
    done = turns.advance(first.pk)
    assert (done.state, done.hint) == ("done", "continue")
    # the supervisor's next look: the reply due comes first, no ordinary turn starts
    assert turns.supervise(agent_pk) is None
    assert GoalTurn.objects.count() == 1

    model_server.script(Text("Cutting it today; lunch needs nothing.\n" + settle_block(
        {"event": asked.pk, "effect": {"kind": "todo", "title": "Cut the release"},
         "reply": "On it: cutting it today."})))
    drain_outbox()  # the lane posts the inbox turn
    [posted] = inbox_turns_of(session_id)
    prompt = posted.input["text"]
    assert "can you cut the release today?" in prompt and "reply due" in prompt
    # the mention, asking for a reply, is drained first; both fit in one turn
    assert f"Event {asked.pk}" in prompt and "lunch is at noon" in prompt
    assert prompt.index("cut the release") < prompt.index("lunch is at noon")
    asked.refresh_from_db()
    assert (asked.state, asked.claim_key) == ("processing", posted.key)

    assert run_host(session_id) == "slept"
    # Pi saw the inbox in its own session: the model request carried the event
    assert any("cut the release today" in json.dumps(r.body)
               for r in model_server.tool_requests())
    drain_outbox()  # the turn's end wakes the settle; the reply is sent and read back

    asked.refresh_from_db()
    assert (asked.state, asked.outcome) == ("acked", "replied")
    assert asked.settlement.effect_kind == "todo"
    assert Todo.objects.filter(title="Cut the release").count() == 1
    sent = replies_in(lark, "om_ask")
    assert [json.loads(m["content"])["text"] for m in sent] == ["On it: cutting it today."]
    assert lark.matching("GET", rf"/open-apis/im/v1/messages/{sent[0]['message_id']}")
    # the answer did not settle the ordinary message: back in line, its drain counted
    lunch = InboxEvent.objects.get(receipt__dedupe_key="om_lunch")
    assert (lunch.state, lunch.claim_key, lunch.drains) == ("pending", "", 1)
    urgency = api.get(AGENT + "inbox/urgency/").json()
    assert (urgency["reply_due"], urgency["pending"]) == (False, 1)

    # with no reply due, the autorun agent's ordinary work goes on before the message
    following = turns.supervise(agent_pk)
    assert (following.state, following.todo_id) == ("queued", second)
    keys = [t.key for t in Turn.objects.filter(session_id=session_id).order_by("id")]
    assert keys == [f"loopx-{first.key}", posted.key]

    # replays change nothing: the settle again, the lane again while a turn is in flight
    inbox_turns.drive(0, {"agent": agent_pk, "session": session_id,
                          "turn_key": posted.key})
    inbox_turns.drive(0, {"agent": agent_pk})
    assert Todo.objects.filter(title="Cut the release").count() == 1
    assert len(replies_in(lark, "om_ask")) == 1
    assert len(inbox_turns_of(session_id)) == 1


def test_an_idle_agent_drains_its_inbox_and_an_unsettled_event_is_left_to_a_person(
        api, session_id, connector, model_server):
    """No autorun, no reply due: the message is still drained on the agent's own schedule.
    An answer that settles nothing puts it back; after MAX_DRIVES it is left for a person
    (the drain/settle API still takes it)."""
    event = ordinary(connector, "the build is green", "om_green")
    model_server.script(*[Text("Noted.") for _ in range(rules.MAX_DRIVES - 1)],
                        Text(settle_block({"event": event.pk,
                                           "effect": {"kind": "no_follow_up"}})))
    drain_outbox()  # the lane: the agent is idle, so the message is drained at once
    for attempt in range(1, rules.MAX_DRIVES + 1):
        assert len(inbox_turns_of(session_id)) == attempt
        assert run_host(session_id) == "slept"
        drain_outbox()  # the settle puts it back; the lane drains it again (counted)
        event.refresh_from_db()
        assert event.drains == min(attempt + 1, rules.MAX_DRIVES)
    assert (event.state, event.claim_key) == ("pending", "")
    drain_outbox()
    assert len(inbox_turns_of(session_id)) == rules.MAX_DRIVES  # given up: no fourth turn
    assert inbox_turns.next_step(connector.agent)[0] is None
    # the last answer's effect lacked its rationale: refused by the settle's own checks
    assert not hasattr(InboxEvent.objects.get(pk=event.pk), "settlement")
    drained = api.post(AGENT + "inbox/drain/", {}).json()
    assert [e["id"] for e in drained["events"]] == [event.pk]


def test_an_ordinary_turn_asked_while_a_reply_is_due_is_skipped_for_the_inbox(
        api, client, session_id, connector, lark):
    api.patch("/api/v1/goals/ship/", {"check_command": "true"})
    api.post("/api/v1/goals/ship/todos/", {"title": "one"})
    mention(client, lark, "are we shipping?", "om_ship")
    Effect.objects.filter(kind=rules.EFFECT_KIND).delete()  # shown written again below
    posted = api.post(AGENT + "turns/", {"key": "t1"})
    assert posted.status_code == 200, posted.content
    body = posted.json()
    assert (body["state"], body["reason"], body["hint"]) == ("skipped", "reply_due",
                                                             "continue")
    assert Effect.objects.filter(kind=rules.EFFECT_KIND,
                                 key=rules.agent_key(connector.agent_id)).exists()
    assert Turn.objects.filter(session_id=session_id).count() == 0


def test_an_answer_from_a_session_no_longer_the_agents_settles_nothing(
        api, session_id, connector, model_server):
    """The binding is checked again before the writeback: the agent detached while its
    inbox turn ran, so its answer, valid as it is, changes nothing and the event waits."""
    event = ordinary(connector, "the build is green", "om_detached")
    model_server.script(Text(settle_block(
        {"event": event.pk, "effect": {"kind": "todo", "title": "Watch the build"}})))
    drain_outbox()
    assert len(inbox_turns_of(session_id)) == 1
    assert api.post(AGENT + "detach/").status_code == 200
    assert run_host(session_id) == "slept"
    drain_outbox()
    event.refresh_from_db()
    assert (event.state, event.claim_key, event.drains) == ("pending", "", 1)
    assert not Todo.objects.filter(title="Watch the build").exists()
    assert len(inbox_turns_of(session_id)) == 1  # no live session: the lane waits


def test_the_supervisors_sweep_sends_the_lane_of_an_agent_with_events_waiting(
        api, session_id, connector):
    """The lane's row is written with the capture; should it be lost (an operator deleted
    it from the admin), the 15 s sweep finds the agent by its waiting events."""
    from goals import tasks

    ordinary(connector, "the build is green", "om_swept")
    Effect.objects.filter(kind=rules.EFFECT_KIND).delete()
    assert tasks.supervise.apply(kwargs={}).get() == 0  # no todo turn: the inbox first
    assert Effect.objects.filter(kind=rules.EFFECT_KIND,
                                 key=rules.agent_key(connector.agent_id)).exists()
