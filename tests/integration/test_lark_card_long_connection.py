"""A card callback over the long connection: the receiver process (`manage.py
lark_receiver`, lark-oapi's WebSocket client) answers it in the frame's reply with the
toast and the answered card, checks it like the webhook does, and does it once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

from conversations.models import CardCallback, Conversation
from intake.models import Delivery, Source
from intake.sources.lark import Lark
from policy import services as policy_services
from runtimes.events import Question, QuestionAsked
from sessions import control, services, timeline
from tests.factories import SessionFactory
from tests.support.lark_events import card_action_event
from tests.support.lark_ws import LarkLongConnection
from tests.support.recording_server import RecordingServer
from tests.support.workers import ROOT, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def test_a_card_callback_over_the_long_connection(tmp_path):
    with RecordingServer() as api, LarkLongConnection() as ws:
        api.state.lark_ws_url = ws.url
        config = Lark.validate_config({"app_id": "cli_one", "bot_open_id": "ou_bot",
                                       "groups": ["oc_team"], "domain": api.url,
                                       "receiver": "long_connection"})
        source = Source(kind="lark", slug="lk", name="lk", config=config)
        source.secrets = {"verification_token": "v", "app_secret": "s"}
        source.save()
        policy_services.save({"acceptance": "manual", "sources": {"lk": {
            "allowed": ["ou_alice"], "rows": {"group_configured": {
                "addressed": True, "unaddressed_allowed": False,
                "unaddressed_anyone": False}}}}}, None)
        session = SessionFactory(runtime="codex")
        control.clear(session.pk)
        turn = services.post_message(session.pk, "ask me")
        timeline.start_turn(session.pk, turn.pk)
        rid = uuid.uuid4().hex
        timeline.record(session.pk, turn.pk, [QuestionAsked(request_id=rid, questions=(
            Question(text="Which color?", options=("red", "blue"), id="color"),))])
        conversation = Conversation.objects.create(source=source, mode="topic",
                                                   chat_id="oc_team", thread_key="omt_1",
                                                   session=session)
        value = {"amux": "question.answer", "conversation": conversation.pk,
                 "session": session.pk, "gen": 1, "request": rid, "question": "color",
                 "option": 1}
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "lark_receiver", "--source", "lk"], cwd=ROOT,
            env=worker_env(tmp_path), stdout=(tmp_path / "log").open("wb"),
            stderr=subprocess.STDOUT, start_new_session=True)
        try:
            ws.wait(lambda s: s.apps() == ["cli_one"])
            event = card_action_event(token="", value=value, chat_id="oc_team")
            frame = ws.push(event, app="cli_one")
            ws.wait(lambda s: frame in s.acks)
            assert ws.acks[frame] == 200
            reply = ws.replies[frame]
            assert reply["toast"]["type"] == "success" and reply["card"]["type"] == "raw"
            assert "Answer: blue" in json.dumps(reply["card"]["data"])
            # Lark delivers the same callback again: the same answer, nothing twice
            again = ws.push(event, app="cli_one")
            ws.wait(lambda s: again in s.acks)
            assert ws.replies[again] == reply
            stranger = card_action_event(token="", value=value, chat_id="oc_team",
                                         operator="ou_mallory")
            refused = ws.push(stranger, app="cli_one")
            ws.wait(lambda s: refused in s.acks)
            assert ws.replies[refused]["toast"]["type"] == "error"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
    answers = [json.loads(x) for x in control.client().lrange(control.key(session.pk), 0, -1)]
    assert [a["answers"] for a in answers if a["op"] == "answer"] == [{"color": "blue"}]
    assert CardCallback.objects.count() == 2 and not Delivery.objects.exists()
