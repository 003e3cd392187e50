"""A connector's state is derived from its source's facts, end to end: the long-connection
receiver (`manage.py lark_receivers`, lark-oapi's real WebSocket client against the fake
long-connection endpoint) beats a heartbeat; Lark's word (a bot-deleted event, 401 from
the bot info) disconnects; a webhook source is judged by its events. Mentions are
admitted by the bot id Lark's bot info states, read through lark-oapi from the recording
server; a configured id that differs refuses them, visibly, until it is fixed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from django.urls import reverse

from intake import process, profile
from intake.models import Source, Trigger
from intake.sources.lark import Lark
from policy import services as policy_services
from tests.integration.goals.conftest import add_agent
from tests.support.intake import processed
from tests.support.lark_events import message_event, sealed
from tests.support.lark_ws import LarkLongConnection
from tests.support.recording_server import RecordingServer
from tests.support.workers import ROOT, wait_for, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

ALICE = "ou_alice"


def _policy(slug: str) -> None:
    policy_services.save({"acceptance": "manual", "sources": {slug: {
        "allowed": [ALICE], "rows": {"group_configured": {"addressed": True}}}}}, None)


def _connector(api, source: str) -> int:
    add_agent(api, "builder", provider="scripted", model="scripted-model")
    response = api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
        "source": source, "source_ref": "oc_team", "ingress_mode": "async_inbox"})
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _state(api, pk: int) -> tuple[str, str | None]:
    body = api.get(f"/api/v1/connectors/{pk}/").json()
    return body["state"], body["state_reason"]


def _health(api, slug: str) -> dict:
    return api.get(f"/api/v1/sources/{slug}/").json()["health"]


def _receivers(tmp_path):
    return subprocess.Popen(
        [sys.executable, "manage.py", "lark_receivers", "--interval", "0.3"], cwd=ROOT,
        env=worker_env(tmp_path, AMUX_RECEIVER_BEAT_SECONDS="0.3"),
        stdout=(tmp_path / "receivers.log").open("ab"), stderr=subprocess.STDOUT,
        start_new_session=True)


def _stop(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)


def _mention(ws, bot: str, message_id: str) -> Trigger:
    event = message_event(token="", chat_id="oc_team", text="@_user_1 ship it",
                          sender=ALICE, mentions=[(bot, "amux")], message_id=message_id,
                          app_id="cli_one")
    frame = ws.push(event, app="cli_one")
    ws.wait(lambda s: frame in s.acks)
    assert ws.acks[frame] == 200
    process.drain()
    return Trigger.objects.get(external_id=f"message:{message_id}")


def _membership(ws, event_type: str) -> None:
    event = {"schema": "2.0",
             "header": {"event_id": f"{event_type}-{time.monotonic_ns()}",
                        "event_type": event_type, "create_time": str(int(time.time() * 1000)),
                        "token": "", "app_id": "cli_one", "tenant_key": "tk"},
             "event": {"chat_id": "oc_team", "operator_id": {"open_id": "ou_admin"},
                       "external": False, "operator_tenant_key": "tk", "name": "team"}}
    frame = ws.push(event, app="cli_one")
    ws.wait(lambda s: frame in s.acks)
    assert ws.acks[frame] == 200
    process.drain()


def test_a_long_connection_connector_follows_its_receiver_and_lark(api, goal, openai_provider,
                                                                   session_dirs, client,
                                                                   operator, settings,
                                                                   tmp_path):
    settings.AMUX_RECEIVER_TIMEOUT_SECONDS = 2.0  # this process reads; receivers beat 0.3 s
    with RecordingServer() as lark_api, LarkLongConnection() as ws:
        lark_api.state.lark_ws_url = ws.url
        lark_api.state.lark_app_open_id = "ou_real"  # the bot Lark names is not ou_bot
        config = Lark.validate_config({"app_id": "cli_one", "bot_open_id": "ou_bot",
                                       "groups": ["oc_team"], "domain": lark_api.url,
                                       "receiver": "long_connection"})
        source = Source(kind="lark", slug="lk", name="lk", config=config)
        source.secrets = {"verification_token": "v", "app_secret": "s"}
        source.save()
        _policy("lk")
        pk = _connector(api, "lk")
        # No receiver has ever beaten: stale, and the reason says why.
        assert _state(api, pk) == ("stale", "receiver_down")

        proc = _receivers(tmp_path)
        try:
            ws.wait(lambda s: s.apps() == ["cli_one"])
            wait_for(lambda: _state(api, pk) == ("listening", None), timeout=30)
            connection = _health(api, "lk")["connection"]
            assert connection["state"] == "listening" and connection["since"]

            # Lark's bot is ou_real, the configuration says ou_bot: a mention is refused
            # with the reason, shown in the source's health and the triage (evals) list.
            refused = _mention(ws, "ou_bot", "om_1")
            assert (refused.decision, refused.reason) == ("ignore", "bot_identity_mismatch")
            identity = _health(api, "lk")["bot_identity"]
            assert identity["state"] == "bot_identity_mismatch"
            assert identity["verified_open_id"] == "ou_real" and identity["verified_at"]
            assert lark_api.matching("GET", r"/open-apis/bot/v3/info")  # read via lark-oapi
            client.force_login(operator)
            triage = client.get("/panel/triage/").content.decode()
            assert "bot_identity_mismatch" in triage
            sources_page = client.get("/panel/sources/").content.decode()
            assert 'data-bot-identity="bot_identity_mismatch"' in sources_page
            assert 'data-connection="listening"' in sources_page
            # a mention of the bot Lark names is refused too while the claim differs
            assert _mention(ws, "ou_real", "om_2").reason == "bot_identity_mismatch"

            # The operator fixes the configuration: the mention is admitted.
            response = api.patch("/api/v1/sources/lk/", {"config": {
                **config, "bot_open_id": "ou_real"}}, format="json")
            assert response.status_code == 200, response.content
            admitted = _mention(ws, "ou_real", "om_3")
            assert admitted.decision != "ignore" and admitted.addressed
            assert _health(api, "lk")["bot_identity"]["state"] == "verified"

            # The receiver dies and stays down (the supervisor is stopped): no heartbeat.
            _stop(proc)
            wait_for(lambda: _state(api, pk) == ("stale", "receiver_down"), timeout=30)
            assert _health(api, "lk")["connection"]["reason"] == "receiver_down"
            proc = _receivers(tmp_path)
            ws.wait(lambda s: s.apps() == ["cli_one"])
            wait_for(lambda: _state(api, pk) == ("listening", None), timeout=30)

            # Lark says the bot was removed from the chat: disconnected, until added back.
            _membership(ws, "im.chat.member.bot.deleted_v1")
            assert _state(api, pk) == ("disconnected", "bot_removed_from_chat")
            assert "oc_team" in _health(api, "lk")["removed_chats"]
            page = client.get(reverse("panel-goal", args=["ship"])).content.decode()
            assert 'data-state-reason="bot_removed_from_chat"' in page
            _membership(ws, "im.chat.member.bot.added_v1")
            assert _state(api, pk) == ("listening", None)

            # Lark refuses the app's credentials on its bot info (401): disconnected.
            lark_api.state.fail_next.append(("GET", r"/open-apis/bot/v3/info", 401))
            assert profile.verify(Source.objects.get(slug="lk"))["state"] == "refused"
            assert _state(api, pk) == ("disconnected", "credentials_refused")
            assert profile.verify(Source.objects.get(slug="lk"))["state"] == "verified"
            assert _state(api, pk) == ("listening", None)

            # Detached by the operator: disconnected whatever the source says.
            assert api.delete(f"/api/v1/connectors/{pk}/").status_code == 200
            assert _state(api, pk) == ("disconnected", "detached")
        finally:
            _stop(proc)


def test_a_webhook_connector_is_stale_when_quiet_past_its_interval(api, goal, openai_provider,
                                                                   session_dirs, client):
    with RecordingServer() as lark_api:
        lark_api.state.lark_app_open_id = "ou_bot"
        config = Lark.validate_config({"app_id": "cli_test", "bot_open_id": "ou_bot",
                                       "groups": ["oc_team"], "domain": lark_api.url,
                                       "expected_interval": 4})
        source = Source(kind="lark", slug="hook", name="hook", config=config)
        source.secrets = {"verification_token": "v-token", "encrypt_key": "k",
                          "app_secret": "s"}
        source.save()
        _policy("hook")
        pk = _connector(api, "hook")
        assert _state(api, pk) == ("listening", None)  # new: within its interval
        wait_for(lambda: _state(api, pk) == ("stale", "no_events_within_interval"),
                 timeout=30)
        # An event arrives: listening again (and the mention is admitted by the bot id
        # the bot info verified when the first event was processed).
        event = message_event(token="v-token", chat_id="oc_team", text="@_user_1 hi",
                              sender=ALICE, mentions=[("ou_bot", "amux")])
        body, headers = sealed(event, encrypt_key="k")
        outcome = processed(client.post("/hooks/lark/hook", data=body,
                                        content_type="application/json", **headers))
        assert Trigger.objects.get(pk=outcome["trigger"]).decision != "ignore"
        assert _state(api, pk) == ("listening", None)
