"""Lark events through the HTTP endpoint: encrypted and signed as Lark does it."""

from __future__ import annotations

import json
import time

import pytest

from intake.models import Delivery, Source, Trigger
from intake.sources.lark import Lark, decrypt, encrypt
from tests.support.intake import processed
from tests.support.lark_events import bot_verified, message_event, sealed

pytestmark = pytest.mark.django_db

TOKEN = "v-token"
KEY = "enc-key-123"
BOT = "ou_bot"


@pytest.fixture
def lark():
    config = Lark.validate_config({"app_id": "cli_test", "bot_open_id": BOT,
                                   "groups": ["oc_team"], "receive_all": ["oc_team"]})
    source = Source(kind="lark", slug="lk", name="Lark", config=config)
    source.secrets = {"verification_token": TOKEN, "encrypt_key": KEY, "app_secret": "sec"}
    source.save()
    bot_verified(source, BOT)
    return source


def post(client, payload, *, slug="lk", key=KEY, **kw):
    body, headers = sealed(payload, encrypt_key=key, **kw)
    return client.post(f"/hooks/lark/{slug}", data=body, content_type="application/json",
                       **headers)


def test_the_sdks_own_decryptor_reads_our_ciphertext():
    from lark_oapi.core.utils.decryptor import AESCipher

    sealed_text = encrypt(KEY, '{"a": 1}')
    assert AESCipher(KEY).decrypt_str(sealed_text) == '{"a": 1}'
    assert decrypt(KEY, sealed_text) == '{"a": 1}'


def test_url_verification_challenge_encrypted(client, lark):
    payload = {"challenge": "c123", "token": TOKEN, "type": "url_verification"}
    body = json.dumps({"encrypt": encrypt(KEY, json.dumps(payload))}).encode()
    response = client.post("/hooks/lark/lk", data=body, content_type="application/json")
    assert response.status_code == 200 and response.json() == {"challenge": "c123"}
    bad = {"challenge": "c123", "token": "wrong", "type": "url_verification"}
    body = json.dumps({"encrypt": encrypt(KEY, json.dumps(bad))}).encode()
    assert client.post("/hooks/lark/lk", data=body,
                       content_type="application/json").status_code == 401


def test_url_verification_plain_when_no_encrypt_key(client, lark):
    lark.secrets = {"verification_token": TOKEN}
    lark.save()
    payload = {"challenge": "c9", "token": TOKEN, "type": "url_verification"}
    response = post(client, payload, key="")
    assert response.json() == {"challenge": "c9"}


def test_encrypted_signed_message_in_a_configured_group(client, lark):
    event = message_event(token=TOKEN, chat_id="oc_team", text="@_user_1 please fix CI",
                          mentions=[(BOT, "amux")])
    body = processed(post(client, event))
    assert body["delivery"] == event["header"]["event_id"] and body["trigger"]
    trigger = Trigger.objects.get(pk=body["trigger"])
    assert trigger.scope == "group_configured" and trigger.addressed and trigger.receives_all
    assert trigger.actor == "ou_alice" and trigger.text == "@amux please fix CI"
    assert trigger.thread.key == "oc_team"


def test_reply_in_a_thread_lands_on_the_root_thread(client, lark):
    event = message_event(token=TOKEN, chat_id="oc_team", root_id="om_root", text="more")
    trigger = Trigger.objects.get(pk=processed(post(client, event))["trigger"])
    assert trigger.thread.key == "oc_team:om_root" and not trigger.addressed


def test_other_groups_only_when_the_bot_is_mentioned_by_open_id(client, lark):
    named = message_event(token=TOKEN, chat_id="oc_other", text="@_user_1 hi",
                          mentions=[("ou_someone_else", "amux")])  # same name, other id
    body = processed(post(client, named))
    assert (body["outcome"], body["reason"]) == ("ignored", "not_addressed")
    mentioned = message_event(token=TOKEN, chat_id="oc_other", text="@_user_1 hi",
                              mentions=[(BOT, "amux")])
    trigger = Trigger.objects.get(pk=processed(post(client, mentioned))["trigger"])
    assert trigger.scope == "group_other" and trigger.addressed and not trigger.receives_all
    lark.refresh_from_db()
    from intake.health_view import health

    assert health(lark)["rejected"]["not_addressed"] == 1


def test_direct_messages(client, lark):
    event = message_event(token=TOKEN, chat_id="oc_dm", chat_type="p2p", text="hi")
    trigger = Trigger.objects.get(pk=processed(post(client, event))["trigger"])
    assert trigger.scope == "direct" and trigger.addressed


def test_own_messages_are_dropped(client, lark):
    event = message_event(token=TOKEN, chat_id="oc_team", sender=BOT, sender_type="app")
    assert processed(post(client, event))["reason"] == "own_message"
    assert not Trigger.objects.exists()


def test_duplicate_event_id_and_duplicate_message_id(client, lark):
    event = message_event(token=TOKEN, chat_id="oc_team", message_id="om_1", event_id="e1")
    assert processed(post(client, event))["trigger"]
    again = post(client, event)
    assert again.status_code == 200 and again.json() == {"duplicate": True, "delivery": "e1"}
    # A reconnect backfill re-delivers the same message under a new event id: stored, and
    # processing finds the message id seen before.
    backfill = message_event(token=TOKEN, chat_id="oc_team", message_id="om_1", event_id="e2")
    assert processed(post(client, backfill))["outcome"] == "duplicate"
    assert Trigger.objects.count() == 1


def test_bad_signature_stale_timestamp_or_missing_signature_is_401(client, lark):
    event = message_event(token=TOKEN)
    assert post(client, event, sign_key="other-key").status_code == 401
    stale = str(int(time.time()) - 3600)
    assert post(client, event, timestamp=stale).status_code == 401
    body, _ = sealed(event, encrypt_key=KEY)
    assert client.post("/hooks/lark/lk", data=body,
                       content_type="application/json").status_code == 401
    # An unencrypted body when the source has an encrypt key is refused too.
    plain = json.dumps(event).encode()
    assert client.post("/hooks/lark/lk", data=plain,
                       content_type="application/json").status_code == 401
    assert not Delivery.objects.exists()


def test_wrong_verification_token_is_401(client, lark):
    assert post(client, message_event(token="nope")).status_code == 401
    assert not Delivery.objects.exists()


@pytest.mark.parametrize("raw", [b"not json", b"{\"encrypt\": \"%%%\"}",
                                 b"{\"encrypt\": \"AAAA\"}"])
def test_malformed_or_undecryptable_is_400(client, lark, raw):
    ts, nonce = str(int(time.time())), "n"
    from intake.sources.lark import signature

    response = client.post(
        "/hooks/lark/lk", data=raw, content_type="application/json",
        HTTP_X_LARK_REQUEST_TIMESTAMP=ts, HTTP_X_LARK_REQUEST_NONCE=nonce,
        HTTP_X_LARK_SIGNATURE=signature(ts, nonce, KEY, raw))
    assert response.status_code == 400
    assert not Delivery.objects.exists()


def test_schema_one_and_missing_fields_are_400(client, lark):
    event = message_event(token=TOKEN)
    event["schema"] = "1.0"
    assert post(client, event).status_code == 400
    event = message_event(token=TOKEN)
    del event["header"]["event_id"]
    assert post(client, event).status_code == 400


def test_other_event_types_are_answered_and_ignored(client, lark):
    event = message_event(token=TOKEN)
    event["header"]["event_type"] = "im.message.reaction.created_v1"
    body = processed(post(client, event))
    assert (body["outcome"], body["reason"]) == ("ignored", "event_not_handled")


def test_document_comments_are_their_own_scope(client, lark):
    lark.config["doc_comments"] = True
    lark.save()
    event = message_event(token=TOKEN)
    event["header"]["event_type"] = "drive.notice.comment_add_v1"
    event["event"] = {"comment_id": "c1", "reply_id": "r1", "is_mentioned": True,
                      "notice_meta": {"file_token": "doxA", "file_type": "docx",
                                      "from_user_id": {"open_id": "ou_alice"},
                                      "from_user_type": "user", "notice_type": "add_comment"}}
    trigger = Trigger.objects.get(pk=processed(post(client, event))["trigger"])
    assert trigger.scope == "doc_comment" and trigger.thread.key == "doc:doxA:c1"
    assert trigger.addressed


def test_unknown_source_is_404(client, lark):
    assert post(client, message_event(token=TOKEN), slug="nope").status_code == 404


def test_foreign_app_id_mention_ignored(client, lark, operator):
    """Addressed = this app's event (header.app_id) mentioning this bot's open id: an event
    of another app mentioning an id equal to ours is ignored, with a content-free reason."""
    other = message_event(token=TOKEN, chat_id="oc_elsewhere", text="@_user_1 deploy",
                          mentions=[(BOT, "amux")], app_id="cli_someone_else")
    assert processed(post(client, other)) == {
        "delivery": other["header"]["event_id"], "trigger": None, "outcome": "ignored",
        "reason": "foreign_app"}
    assert not Trigger.objects.exists()
    ours = message_event(token=TOKEN, chat_id="oc_elsewhere", text="@_user_1 deploy",
                         mentions=[(BOT, "amux")], app_id="cli_test")
    trigger = Trigger.objects.get(pk=processed(post(client, ours))["trigger"])
    assert trigger.addressed and trigger.scope == "group_other"
    # Our app, but the mention is of someone else: not addressed, not taken.
    someone = message_event(token=TOKEN, chat_id="oc_elsewhere", text="@_user_1 deploy",
                            mentions=[("ou_carol", "amux")], app_id="cli_test")
    assert processed(post(client, someone))["reason"] == "not_addressed"
    # A document comment event of another app is ignored the same way.
    lark.config = {**lark.config, "doc_comments": True}
    lark.save()
    comment = message_event(token=TOKEN, app_id="cli_someone_else")
    comment["header"]["event_type"] = "drive.notice.comment_add_v1"
    comment["event"] = {"comment_id": "c9", "reply_id": "r9", "is_mentioned": True,
                        "notice_meta": {"file_token": "doxZ", "file_type": "docx",
                                        "from_user_id": {"open_id": "ou_alice"},
                                        "from_user_type": "user", "notice_type": "add_comment"}}
    assert processed(post(client, comment))["reason"] == "foreign_app"
    client.force_login(operator)
    page = client.get("/panel/sources/").content.decode()
    assert 'data-reason="foreign_app"' in page


def test_bot_open_id_verified_against_bot_info(client, lark, operator):
    """The configured bot_open_id is checked against the bot's identity as Lark states it
    (GET /open-apis/bot/v3/info, tenant token); a mismatch shows plainly in health."""
    import urllib.error
    import urllib.request

    from intake import profile
    from intake.health_view import health
    from tests.support.recording_server import RecordingServer

    with RecordingServer() as server:
        server.state.lark_app_open_id = BOT
        lark.config = {**lark.config, "domain": server.url, "app_id": "cli_botinfo"}
        lark.save()
        assert profile.verify_all() == 1
        lark.refresh_from_db()
        assert health(lark)["profile"]["state"] == "verified"
        assert server.matching("GET", r"/open-apis/bot/v3/info")[0].headers[
            "authorization"] == f"Bearer {server.tenant_token}"

        server.state.lark_app_open_id = "ou_another_bot"  # the app's bot is not ours
        assert profile.verify(lark)["state"] == "mismatch"
        lark.refresh_from_db()
        client.force_login(operator)
        page = client.get("/panel/sources/").content.decode()
        assert "bot_open_id does not match the bot Lark reports" in page

        # The route is as strict as Lark: a bad tenant token is refused with its code.
        request = urllib.request.Request(f"{server.url}/open-apis/bot/v3/info",
                                         headers={"Authorization": "Bearer t-forged"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert json.loads(refused.value.read())["code"] == 99991663

        # Without an app secret there is nothing to ask with: not checked.
        lark.secrets = {"verification_token": TOKEN, "encrypt_key": KEY}
        lark.save()
        assert profile.verify(lark) is None
