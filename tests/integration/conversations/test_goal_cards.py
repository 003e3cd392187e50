"""Goal cards in a Lark topic bound to a real Codex session (the app-server driven by the
scripted model): `goal` with no goal answers the goal help, the session page shows the
same help, and a goal card's button, clicked as Lark delivers the click (a signed
`card.action.trigger` to POST /hooks/lark/<slug>), pauses the native goal — while a card of
a goal replaced by `goal set` controls nothing.

Real things only: signed events into the webhook, the real intake and outbox drainers,
lark-oapi against the recording Lark server, the real Codex app-server in a session host of
this process."""

from __future__ import annotations

import json

import pytest

from conversations.models import CardCallback, Conversation, EventCard
from sessions.models import Session, SessionGoal, TimelineEvent, Turn
from tests.integration.conversations.test_lark_conversations import (
    ALICE,
    KEY,
    TOKEN,
    drain_until,
    lark_source,
    say,
)
from tests.integration.sessions.test_goals import Responder, _host, _stop
from tests.support.lark_events import card_action_event, sealed
from tests.support.recording_server import RecordingServer
from tests.support.sessions import wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(300)]

SEVEN = ["goal &lt;text&gt;", "goal", "goal pause", "goal resume", "goal clear",
         "goal set &lt;text&gt;", "goal budget &lt;tokens&gt;"]


@pytest.fixture
def lark_server():
    with RecordingServer() as server:
        yield server


@pytest.fixture
def codex_worker(openai_provider):
    from tickets.models import AgentSettings

    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "codex", "worker_provider": openai_provider,
        "worker_model": "gpt-5.5"})


def _posted(server, card: EventCard) -> dict:
    return json.loads(server.state.lark_store[card.message_id]["content"])


def _markdown(card_json: dict) -> str:
    return "\n".join(el["content"] for el in card_json["body"]["elements"]
                     if el.get("tag") == "markdown")


def _listed(text: str) -> list[str]:
    return [line[4:line.index("** — ")] for line in text.splitlines()
            if line.startswith("- **")]


def _button_values(card_json: dict) -> dict[str, dict]:
    return {b["behaviors"][0]["value"]["amux"]: b["behaviors"][0]["value"]
            for el in card_json["body"]["elements"] if el.get("tag") == "column_set"
            for col in el["columns"] for b in col["elements"]}


def _sent_goal_card(key: str) -> EventCard | None:
    return EventCard.objects.filter(kind="goal", request_id=key).exclude(
        message_id="").first()


def click(client, card: EventCard, value: dict, operator=ALICE):
    """A click on the posted card, delivered as Lark does: encrypted and signed."""
    event = card_action_event(token=TOKEN, value=value, chat_id=card.chat_id,
                              message_id=card.message_id, operator=operator)
    body, headers = sealed(event, encrypt_key=KEY)
    return client.post("/hooks/lark/lk", data=body, content_type="application/json",
                       **headers)


def _status(sid):
    row = SessionGoal.objects.filter(session_id=sid).first()
    return (row.snapshot or {}).get("status") if row and row.snapshot else None


def test_goal_help_and_a_goal_card_clicked_through_the_signed_endpoint(
        client, operator, lark_server, codex_worker, session_dirs, model_server):
    responder = Responder()
    model_server.responder = responder
    lark_source(lark_server)
    say(client, lark_server, text="hello", message_id="om_1", thread_id="omt_1")
    conversation = Conversation.objects.get()
    sid = conversation.session_id
    Session.objects.filter(pk=sid).update(idle_timeout_s=600)
    client.force_login(operator)
    page = client.get(f"/panel/sessions/{sid}/").content.decode()
    assert 'id="goal-help"' not in page  # the runtime has not said yet whether it has goals
    thread = _host(sid)
    try:
        first = Turn.objects.get(session_id=sid)
        wait_for(lambda: Turn.objects.get(pk=first.pk).state == "completed", timeout=90)
        wait_for(lambda: Session.objects.get(pk=sid).runtime_facts.get("goals") is True)

        # the session page: the same short help, now that Codex declared goals
        page = client.get(f"/panel/sessions/{sid}/").content.decode()
        assert 'id="goal-help"' in page
        for typed in SEVEN:
            assert f"<code>{typed}</code>" in page, typed
        assert "设置 token 预算（正整数）" in page

        # `goal` with no goal: a status card that lists the seven commands
        say(client, lark_server, text="goal", message_id="om_2", thread_id="omt_1",
            root_id="om_1", mention=False)
        help_card = drain_until(lambda: _sent_goal_card(""))
        shown = _posted(lark_server, help_card)
        assert shown["header"]["title"]["content"] == "Goal"
        assert "No goal is set." in _markdown(shown) and _listed(_markdown(shown)) == SEVEN
        assert not _button_values(shown)
        assert lark_server.state.lark_store[help_card.message_id]["thread_id"] == "omt_1"
        assert Turn.objects.filter(session_id=sid).count() == 1  # no turn for a command

        # a goal: its card carries Pause and Clear
        say(client, lark_server, text="goal write the release notes", message_id="om_3",
            thread_id="omt_1", root_id="om_1", mention=False)
        key = wait_for(lambda: SessionGoal.objects.filter(session_id=sid).exclude(
            goal_key="").values_list("goal_key", flat=True).first())
        wait_for(lambda: _status(sid) == "active", timeout=60)
        old_card = drain_until(lambda: _sent_goal_card(key))
        old_values = drain_until(lambda: _button_values(_posted(lark_server, old_card)))
        assert set(old_values) == {"goal.pause", "goal.clear"}
        assert old_values["goal.pause"]["goal_key"] == key
        assert "write the release notes" in _markdown(_posted(lark_server, old_card))

        # Pause, clicked in Lark: the authorization goes, and Codex pauses the goal
        response = click(client, old_card, old_values["goal.pause"])
        assert response.status_code == 200, response.content
        assert response.json()["toast"] == {"type": "success",
                                            "content": "Goal paused · 目标已暂停"}
        assert SessionGoal.objects.get(session_id=sid).authorized is False
        wait_for(lambda: _status(sid) == "paused", timeout=30)
        # the runtime's own report of the pause may be recorded before the command's answer
        wait_for(lambda: TimelineEvent.objects.filter(session_id=sid, type="goal.updated",
                                                      payload__command="pause").exists(),
                 timeout=30)

        # `goal set`: a new goal with a card of its own; the old card goes inert
        say(client, lark_server, text="goal set write the changelog", message_id="om_4",
            thread_id="omt_1", root_id="om_1", mention=False)
        new_key = wait_for(lambda: SessionGoal.objects.filter(session_id=sid).exclude(
            goal_key__in=["", key]).values_list("goal_key", flat=True).first())
        wait_for(lambda: (SessionGoal.objects.get(session_id=sid).snapshot or {}).get(
            "objective") == "write the changelog", timeout=60)
        new_card = drain_until(lambda: _sent_goal_card(new_key))
        drain_until(lambda: EventCard.objects.get(pk=old_card.pk).state == "inert"
                    and not _button_values(_posted(lark_server, old_card)))
        assert Conversation.objects.get(pk=conversation.pk).generation == \
            conversation.generation  # goal set keys cards by goal, not by generation

        # a click on the replaced goal's card (Lark still shows it): refused, nothing moves
        refused = click(client, old_card, old_values["goal.pause"])
        assert refused.status_code == 200
        assert refused.json()["toast"]["type"] == "error"
        assert "replaced or cleared" in refused.json()["toast"]["content"]
        assert CardCallback.objects.filter(outcome__refused="stale_goal").count() == 1
        row = SessionGoal.objects.get(session_id=sid)
        assert row.goal_key == new_key and row.authorized is True
        assert row.objective == "write the changelog"

        # the new goal's own card still works
        wait_for(lambda: _status(sid) == "active", timeout=60)
        new_values = drain_until(lambda: "goal.pause" in _button_values(
            _posted(lark_server, new_card)) and _button_values(_posted(lark_server, new_card)))
        assert new_values["goal.pause"]["goal_key"] == new_key
        paused = click(client, new_card, new_values["goal.pause"])
        assert paused.json()["toast"]["type"] == "success", paused.json()
        wait_for(lambda: _status(sid) == "paused", timeout=30)
    finally:
        _stop(sid, thread)
