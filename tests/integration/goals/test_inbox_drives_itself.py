"""The inbox drives itself, end to end with real processes (issue 32, item 5): real Celery
workers as `amux run` starts them (a runtime worker hosting the session's real Pi against
the scripted model, a default worker for the supervisor and the outbox) and no beat, so
nothing sweeps. A mention is captured; nobody calls the drain or settle API. The outbox
row written with the capture drains it into an inbox turn, Pi answers, the turn's
``session.turn_ended`` fact wakes the settle, and the reply is sent to the recording Lark
server, read back and only then acknowledged."""

from __future__ import annotations

import json
import re

import pytest
from django.core.cache import cache
from django.utils import timezone

from effects import outbox
from goals import ingress
from goals.models import InboxEvent, Todo
from sessions.models import Turn
from tests.integration.goals.test_inbox_drain import ALICE, CHAT, _connector, _source
from tests.support.model_server import Text
from tests.support.recording_server import RecordingServer
from tests.support.workers import amux_workers, purge_queues, wait_for, worker_env

pytestmark = [pytest.mark.xdist_group("processes"), pytest.mark.e2e,
              pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture
def lark():
    with RecordingServer() as srv:
        yield srv


@pytest.fixture
def workers(settings, session_id, tmp_path):
    purge_queues()
    cache.delete(outbox.KICK_FLAG)
    started = amux_workers("inbox", worker_env(settings.DATA_DIR), sessions=2, logs=tmp_path)
    yield started
    for worker in started:
        worker.stop()
    purge_queues()


def answer_the_inbox(body: dict) -> Text:
    """Pi's model: an inbox turn's events are settled with a todo and a reply."""
    ids = sorted({int(n) for n in re.findall(r"Event (\d+) \(", json.dumps(body))})
    settle = [{"event": n, "effect": {"kind": "todo", "title": "Cut the release"},
               "reply": "On it: cutting it today."} for n in ids]
    return Text("Done.\n```json\n" + json.dumps({"settle": settle}) + "\n```")


def test_a_mention_is_drained_answered_and_acked_with_no_api_call(
        api, session_id, lark, model_server, workers):
    _source(lark.url)
    connector = _connector(api)
    model_server.responder = answer_the_inbox
    lark.lark_message("om_e2e", chat_id=CHAT, text="@_user_1 can you cut the release?")
    receipt = ingress.accept(connector, ingress.Event(
        dedupe_key="om_e2e", kind="mention", text="can you cut the release?", actor=ALICE,
        addressed=True, at=timezone.now(), place=CHAT))
    assert receipt.outcome == "inboxed"

    runtime, default = workers
    try:
        event = wait_for(lambda: InboxEvent.objects.filter(pk=receipt.inboxed.pk,
                                                           state="acked").first(),
                         timeout=150, interval=0.2)
    except TimeoutError:
        pytest.fail(f"the inbox did not settle itself:\n{runtime.log()[-3000:]}\n"
                    f"{default.log()[-3000:]}")
    assert event.outcome == "replied"
    assert event.settlement.effect_kind == "todo"
    assert Todo.objects.filter(title="Cut the release").count() == 1
    sent = [m for m in lark.state.lark_store.values()
            if m["sender"] == "app" and m["parent_id"] == "om_e2e"]
    assert [json.loads(m["content"])["text"] for m in sent] == ["On it: cutting it today."]
    [inbox_turn] = Turn.objects.filter(session_id=session_id, key__startswith="inbox-")
    assert inbox_turn.state == "completed"
    assert "can you cut the release?" in inbox_turn.input["text"]
