"""Cards for events that ask something of a person or report a goal, in a bound topic:
sent through the outbox and lark-oapi, updatable through `delivery.patch_card`. The
events are written by the real timeline writer, as the runtime adapters and goals do."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conversations import delivery
from conversations.models import Conversation, EventCard, TurnReply
from effects import outbox
from runtimes import events as rt
from sessions import timeline
from sessions.models import Turn
from sessions.new_session import Launch
from tests.integration.conversations.test_lark_conversations import (
    drain_until,
    lark_source,
    say,
)
from tests.support.recording_server import RecordingServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lark_server():
    with RecordingServer() as server:
        yield server


@pytest.fixture
def bound(client, lark_server, openai_provider, session_dirs):
    from tickets.models import AgentSettings

    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "codex", "worker_provider": openai_provider,
        "worker_model": "gpt-5.5"})
    lark_source(lark_server)
    say(client, lark_server, text="help me", message_id="om_1", thread_id="omt_1")
    return Conversation.objects.get()


def _uses_fallback(kind: str) -> bool:
    return importlib.util.find_spec(f"conversations.cards.{kind}") is None


def test_a_question_and_a_goal_get_cards_in_the_topic(bound, lark_server):
    session_id = bound.session_id
    turn = Turn.objects.get(session_id=session_id)
    timeline.start_turn(session_id, turn.pk)
    timeline.record(session_id, turn.pk, [rt.QuestionAsked(request_id="q1", questions=(
        rt.Question(text="Which branch?", options=("main", "dev"), id="b"),))])
    timeline.note(session_id, "goal.updated", {
        "goal": {"objective": "ship it", "status": "active", "token_budget": None,
                 "tokens_used": 0, "time_used_seconds": 0},
        "goal_key": "g1", "command": "create", "location": None})
    # (the first Lark call of a process imports lark-oapi, which takes seconds here)
    drain_until(lambda: EventCard.objects.count() == 2
                and not EventCard.objects.filter(message_id="").exists())
    cards = {c.kind: c for c in EventCard.objects.all()}
    assert set(cards) == {"question", "goal"}
    assert cards["question"].request_id == "q1" and cards["question"].message_id
    assert all(c.chat_id == "oc_team" and c.generation == bound.generation
               for c in cards.values())
    posted = {m["message_id"]: m for m in lark_server.lark_cards("oc_team")}
    turn_card = TurnReply.objects.get(turn=turn)
    assert set(posted) == {turn_card.message_id, cards["question"].message_id,
                           cards["goal"].message_id}
    assert all(m["thread_id"] == "omt_1" for m in posted.values())  # all in the topic
    if _uses_fallback("question"):
        text = json.dumps(json.loads(posted[cards["question"].message_id]["content"]))
        assert "Which branch?" in text and "main" in text
    if _uses_fallback("goal"):
        assert "ship it" in posted[cards["goal"].message_id]["content"]
    # answered: the card is patched in place and its state follows
    delivery.patch_card(cards["question"], {"schema": "2.0", "config": {"update_multi": True},
                                            "body": {"elements": []}}, state="answered")
    drain_until(lambda: lark_server.state.lark_store[cards["question"].message_id]["updates"])
    assert lark_server.state.lark_store[cards["question"].message_id]["updates"] == 1
    assert EventCard.objects.get(pk=cards["question"].pk).state == "answered"


def test_an_unbound_session_sends_nothing(lark_server, openai_provider, session_dirs):
    from sessions import services

    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    turn = services.post_message(session.pk, "hello", origin={"via": "web", "actor": "x"})
    timeline.start_turn(session.pk, turn.pk)
    timeline.record(session.pk, turn.pk, [rt.MessageCompleted(text="hi"), rt.TurnCompleted()])
    outbox.drain(seconds=2)
    assert not TurnReply.objects.exists() and not EventCard.objects.exists()
    assert Turn.objects.get(pk=turn.pk).origin == {"via": "web", "actor": "x"}
    assert not lark_server.requests


def test_a_card_is_updated_at_most_every_spacing_and_its_final_state_always(bound,
                                                                           lark_server):
    import time

    from effects.models import Effect

    session_id = bound.session_id
    turn = Turn.objects.get(session_id=session_id)
    timeline.start_turn(session_id, turn.pk)
    drain_until(lambda: TurnReply.objects.filter(turn=turn).exclude(message_id="").exists())
    reply = TurnReply.objects.get(turn=turn)
    posted_at = time.monotonic()
    timeline.record(session_id, turn.pk, [rt.MessageCompleted(text="step one")])
    outbox.drain(seconds=1)
    held = lark_server.state.lark_store[reply.message_id]["updates"] == 0
    if time.monotonic() - posted_at < delivery.PATCH_SPACING:
        # too soon after the last update: it waits, in line, for the spacing to pass
        assert held and Effect.objects.filter(kind="conversation.reply").exists()
    timeline.record(session_id, turn.pk, [rt.MessageCompleted(text="all done"),
                                          rt.TurnCompleted()])
    drain_until(lambda: TurnReply.objects.get(pk=reply.pk).final)
    card = lark_server.state.lark_store[reply.message_id]
    # the waiting update was superseded by the final one (on a machine too slow to drain
    # within the spacing, the first update went out on its own)
    assert card["updates"] == (1 if held else 2)
    assert "all done" in card["content"] and "step one" not in card["content"]


def _goal(key: str, objective: str, status: str, tokens: int, command: str | None) -> dict:
    return {"goal": {"objective": objective, "status": status, "token_budget": None,
                     "tokens_used": tokens, "time_used_seconds": tokens // 100},
            "goal_key": key, "command": command, "location": None}


def _buttons(content: str) -> list[str]:
    return [b["behaviors"][0]["value"]["amux"]
            for e in json.loads(content)["body"]["elements"] if e.get("tag") == "column_set"
            for col in e["columns"] for b in col["elements"]]


def test_a_goal_is_one_card_patched_as_it_runs_and_a_replaced_goal_goes_inert(
        bound, lark_server):
    sid = bound.session_id
    timeline.note(sid, "goal.updated", _goal("g1", "ship it", "active", 0, "create"))
    drain_until(lambda: EventCard.objects.filter(kind="goal").exclude(message_id="").exists())
    first = EventCard.objects.get(kind="goal")
    for tokens in (1200, 2400, 3600):  # three goal turns report their usage
        timeline.note(sid, "goal.updated", _goal("g1", "ship it", "active", tokens, None))
    drain_until(lambda: "3,600" in lark_server.state.lark_store[first.message_id]["content"])
    assert EventCard.objects.filter(kind="goal").count() == 1  # patched, never reposted
    assert _buttons(lark_server.state.lark_store[first.message_id]["content"]) == [
        "goal.pause", "goal.clear"]
    # `goal set`: a new goal, a new card; the old one keeps its text and loses its buttons
    timeline.note(sid, "goal.updated", _goal("g2", "ship it twice", "active", 0, "set"))
    drain_until(lambda: EventCard.objects.filter(kind="goal").exclude(message_id="")
                .count() == 2 and not _buttons(
                    lark_server.state.lark_store[first.message_id]["content"]))
    old, new = EventCard.objects.filter(kind="goal").order_by("id")
    assert old.state == "inert" and new.state == "open" and new.request_id == "g2"
    assert "ship it" in lark_server.state.lark_store[old.message_id]["content"]
    # cleared: the current card shows it and goes inert; no further card
    timeline.note(sid, "goal.cleared", {"goal_key": "g2", "command": "clear", "location": None})
    drain_until(lambda: EventCard.objects.get(pk=new.pk).state == "inert"
                and not _buttons(lark_server.state.lark_store[new.message_id]["content"]))
    assert EventCard.objects.filter(kind="goal").count() == 2


def test_a_singleton_goal_turn_shows_where_the_goal_was_created(
        client, lark_server, openai_provider, session_dirs):
    """The bot-wide session heard a chat after the goal was created in the group: the
    goal's own turns still go to the group, replying to the message that created it."""
    from sessions.models import SessionGoal
    from sessions.native_goals import GOAL_ORIGIN, GOAL_TURN
    from tests.integration.conversations.test_lark_conversations import BOB
    from tickets.models import AgentSettings

    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "codex", "worker_provider": openai_provider,
        "worker_model": "gpt-5.5"})
    lark_source(lark_server, mode="singleton")
    say(client, lark_server, text="please ship it", message_id="om_g")
    conversation = Conversation.objects.get()
    session_id = conversation.session_id
    created_in = Turn.objects.get(session_id=session_id).origin
    SessionGoal.objects.create(session_id=session_id, goal_key="g1", objective="ship it",
                               authorized=True, location=created_in)
    for turn in Turn.objects.filter(session_id=session_id):
        timeline.start_turn(session_id, turn.pk)
        timeline.record(session_id, turn.pk, [rt.TurnCompleted()])
    say(client, lark_server, text="unrelated", message_id="om_d", chat_id="oc_dm",
        chat_type="p2p", sender=BOB, mention=False)
    dm_turn = Turn.objects.filter(session_id=session_id).order_by("-id").first()
    timeline.start_turn(session_id, dm_turn.pk)
    timeline.record(session_id, dm_turn.pk, [rt.TurnCompleted()])
    assert TurnReply.objects.get(turn=dm_turn).chat_id == "oc_dm"
    goal_turn, _ = timeline.enqueue_input(session_id, "ship it", key="goal:g1:t1",
                                          command=GOAL_TURN,
                                          origin={**GOAL_ORIGIN, "goal_key": "g1"})
    timeline.start_turn(session_id, goal_turn.pk)
    reply = TurnReply.objects.get(turn=goal_turn)
    assert (reply.chat_id, reply.reply_to) == ("oc_team", "om_g")
