"""The Lark source's card sending, through the real lark-oapi against the recording Lark
server, which answers as strictly as Lark: a reply to a message it does not have, an
update of a message that is not the app's shared card, a missing tenant token."""

from __future__ import annotations

import pytest

from intake.sources.base import SendResult
from intake.sources.lark import Lark
from tests.support.recording_server import RecordingServer

CARD = {"schema": "2.0", "config": {"update_multi": True},
        "body": {"elements": [{"tag": "markdown", "content": "hi"}]}}


@pytest.fixture
def server():
    with RecordingServer() as s:
        yield s


def plug(server, secret="sec"):
    config = Lark.validate_config({"app_id": "cli_test", "domain": server.url})
    return Lark(config, {"verification_token": "t", "app_secret": secret})


def test_a_card_is_posted_once_per_key_and_updated_in_place(server):
    server.lark_message("om_1", chat_id="oc_1", thread_id="omt_1")
    lark = plug(server)
    first = lark.send_card(key="k", card=CARD, reply_to="om_1", in_thread=True)
    again = lark.send_card(key="k", card=CARD, reply_to="om_1", in_thread=True)
    assert first.result is SendResult.SENT and again.message_id == first.message_id
    assert len(server.lark_cards("oc_1")) == 1
    updated = {**CARD, "body": {"elements": [{"tag": "markdown", "content": "done"}]}}
    assert lark.patch_card(first.message_id, updated) is SendResult.SENT
    [card] = server.lark_cards("oc_1")
    assert card["updates"] == 1 and card["card"]["body"]["elements"][0]["content"] == "done"
    assert card["thread_id"] == "omt_1"
    patch = server.matching("PATCH", rf"/open-apis/im/v1/messages/{first.message_id}")[0]
    assert patch.headers["authorization"] == f"Bearer {server.tenant_token}"


def test_lark_refusals_are_told_apart(server):
    lark = plug(server)
    gone = lark.send_card(key="k1", card=CARD, reply_to="om_nowhere")
    assert (gone.result, gone.code) == (SendResult.GONE, 230011)
    server.lark_message("om_user", chat_id="oc_1")
    assert lark.patch_card("om_user", CARD) is SendResult.GONE  # not the app's: 230026
    assert lark.patch_card("om_nowhere", CARD) is SendResult.GONE
    not_shared = lark.send_card(key="k2", card={"schema": "2.0", "body": {"elements": []}},
                                chat_id="oc_1")
    assert not_shared.result is SendResult.SENT
    assert lark.patch_card(not_shared.message_id, CARD) is SendResult.GONE  # no update_multi
    codes = [r for r in server.requests if r.method == "PATCH"]
    assert len(codes) == 3


def test_without_the_app_secret_nothing_is_sent(server):
    lark = plug(server, secret="")
    sent = lark.send_card(key="k", card=CARD, chat_id="oc_1")
    assert sent.result is SendResult.RETRY and not server.lark_cards()
    assert not server.matching("POST", r"/open-apis/im/v1/messages")
