"""Pure rules of the source plugins: config schema, mentions, scope, signatures."""

from __future__ import annotations

import json
import time

import pytest

from intake.sources import KINDS
from intake.sources.base import ConfigError, Incoming, Malformed, Unauthorized, mentions
from intake.sources.github import GitHub
from intake.sources.lark import (
    DocCursor,
    Lark,
    comment_marker,
    comment_parts,
    comment_trigger_id,
    decrypt,
    encrypt,
    signature,
)


def test_every_kind_declares_a_form_and_health():
    for cls in KINDS.values():
        assert cls.label and cls.health_items
        assert all(f.name and f.label for f in cls.fields + cls.secret_fields)


def test_github_config_defaults_and_coercion():
    config = GitHub.validate_config({"repo": "a/b\nc/d", "receive_all": "on"})
    assert config["repo"] == ["a/b", "c/d"] and config["receive_all"] is True
    assert config["api_url"] == "https://api.github.com" and config["default_branch"] == "main"
    assert GitHub.validate_config({"repo": "a/b", "api_url": "https://ghe.example/api/v3/"})[
        "api_url"] == "https://ghe.example/api/v3"


def test_config_errors_name_each_field():
    with pytest.raises(ConfigError) as err:
        GitHub.validate_config({"repo": "nope", "poll": "maybe", "extra": 1})
    assert set(err.value.fields) == {"config.repo", "config.poll", "config.extra"}
    with pytest.raises(ConfigError) as err:
        Lark.validate_config({"freshness_seconds": "soon"})
    assert {"config.app_id", "config.freshness_seconds"} <= set(err.value.fields)


def test_github_needs_a_token_or_an_app():
    assert "token" in GitHub.check_secrets({}, {"webhook_secret": "x"})
    assert GitHub.check_secrets({}, {"webhook_secret": "x", "app_id": "1",
                                     "private_key": "k"}) == {}


@pytest.mark.parametrize("text,expected", [
    ("@amux-bot please", True),
    ("hey @AMUX-BOT[bot], look", True),
    ("email me@amux-bot.dev", False),
    ("@amux-bots are many", False),
    ("> @amux-bot quoted", False),
    ("```\n@amux-bot in code\n```", False),
    ("see `@amux-bot`", False),
    ("", False),
])
def test_mentions(text, expected):
    assert mentions(text, "amux-bot") is expected


def test_scope_depends_only_on_meta_and_config():
    gh = GitHub({"repo": ["a/b"]}, {})
    assert gh.scope({"scope": "comment", "repo": "a/b"}) == "comment"
    assert gh.scope({"scope": "comment", "repo": "x/y"}) is None  # repo no longer received
    lark = Lark({"app_id": "x", "groups": []}, {})
    assert lark.scope({"scope": "group_configured", "chat_id": "oc_1"}) == "group_other"
    assert lark.scope({"scope": "doc_comment"}) is None


def test_environment_holds_no_credentials():
    env = GitHub({"repo": ["a/b"], "handle": "bot"}, {"token": "ghp_x",
                                                     "webhook_secret": "w"}).environment()
    assert all(k.startswith("AMUX_GITHUB_") for k in env)
    assert "ghp_x" not in json.dumps(env) and "w" not in env.values()


def test_lark_crypto_round_trip_and_signature():
    assert decrypt("k", encrypt("k", "héllo")) == "héllo"
    with pytest.raises(ValueError):
        decrypt("other", encrypt("k", "x" * 40))
    assert signature("1", "n", "k", b"{}") == signature("1", "n", "k", b"{}")


def test_lark_verify_refuses_without_a_token_and_checks_freshness():
    body = json.dumps({"schema": "2.0", "header": {"token": "t", "event_id": "e",
                                                   "event_type": "x"}, "event": {}}).encode()
    with pytest.raises(Unauthorized):
        Lark({"app_id": "a"}, {}).verify(Incoming({}, body))
    sealed = json.dumps({"encrypt": encrypt("k", body.decode())}).encode()
    old = str(int(time.time()) - 1000)
    headers = {"x-lark-request-timestamp": old, "x-lark-request-nonce": "n",
               "x-lark-signature": signature(old, "n", "k", sealed)}
    plug = Lark({"app_id": "a"}, {"verification_token": "t", "encrypt_key": "k"})
    with pytest.raises(Unauthorized) as err:
        plug.verify(Incoming(headers, sealed))
    assert err.value.reason == "stale_signature"
    assert plug.verify(Incoming(headers, sealed), now=int(old) + 10).delivery_id == "e"
    with pytest.raises(Malformed):
        Lark({"app_id": "a"}, {"verification_token": "t"}).verify(Incoming({}, b"[]"))


def test_lark_watched_documents_are_type_and_token():
    config = Lark.validate_config({"app_id": "a", "documents": "docx:doxA\nsheet:shtB"})
    assert Lark(config).documents() == [("docx", "doxA"), ("sheet", "shtB")]
    assert "app_secret" not in Lark.check_secrets(config, {"verification_token": "v"})
    polling = {**config, "doc_comments": True}
    assert "app_secret" in Lark.check_secrets(polling, {"verification_token": "v"})
    assert "app_secret" in Lark.check_secrets({"receiver": "long_connection"}, {})
    assert "app_secret" in Lark.check_secrets({"groups": ["oc_a"]}, {})  # chat catch-up
    with pytest.raises(ConfigError) as err:
        Lark.validate_config({"app_id": "a", "documents": ["https://x.feishu.cn/docx/doxA"]})
    assert "config.documents" in err.value.fields


def test_a_comment_and_its_replies_have_one_trigger_id_whichever_path_saw_them():
    assert comment_trigger_id("c1", "", "add_comment") == "doc_comment:c1"
    assert comment_trigger_id("c1", "r1", "add_comment") == "doc_comment:c1"
    assert comment_trigger_id("c1", "c1", "") == "doc_comment:c1"
    assert comment_trigger_id("c1", "r2", "add_reply") == "doc_comment:c1:r2"


def test_a_document_cursor_takes_each_reply_once_even_within_one_second():
    def r(rid, at, comment="c"):
        return {"reply_id": rid, "create_time": at, "comment_id": comment}

    cursor = DocCursor.load({"value": DocCursor(100).value(), "seen": ["a"]})
    assert cursor == DocCursor(100, ("a",))
    steps = cursor.newer([r("z", 101), r("a", 100), r("b", 100), r("old", 99), r("y", 101, "b")])
    assert [s[0]["reply_id"] for s in steps] == ["b", "y", "z"]  # by time, comment, reply
    assert [s[1] for s in steps] == [DocCursor(100, ("a", "b")), DocCursor(101, ("y",)),
                                     DocCursor(101, ("y", "z"))]
    assert steps[-1][1].newer([r("z", 101), r("y", 101, "b")]) == []


def test_a_comment_reply_is_escaped_and_cut_into_parts_never_inside_an_escape():
    assert comment_parts("  see <A1:A9>  ") == ["see &lt;A1:A9&gt;"]
    assert comment_parts("ab\ncd\nef", limit=6) == ["ab\ncd", "ef"]  # after a line break
    assert comment_parts("abcd<e", limit=6) == ["abcd", "&lt;e"]  # the escape stays whole
    long = ("x" * 50 + "\n") * 300
    parts = comment_parts(long)
    assert len(parts) == 2 and all(len(p) <= 10_000 - 40 for p in parts)
    assert "\n".join(parts) == long.strip()
    marker = comment_marker("effect-12")
    assert marker.startswith("[amux:") and marker == comment_marker("effect-12")
    assert marker != comment_marker("effect-13")
    assert comment_marker("effect-12", 1, 3) == marker[:-1] + " 2/3]"


def test_a_source_keeps_its_slug_once_it_has_received_events():
    from intake.source_rules import slug_change_refused

    assert slug_change_refused("gh", "gh", has_events=True) is None
    assert slug_change_refused("gh", "github", has_events=False) is None
    reason = slug_change_refused("gh", "github", has_events=True)
    assert reason and "webhook URL" in reason and "policy" in reason


def test_doc_cursor_catch_up_is_bounded_and_passing_follows_newer():
    def r(rid, at, comment="c"):
        return {"reply_id": rid, "create_time": at, "comment_id": comment}

    now = 1_000_000
    replies = [r("old", now - 8 * 86400), r("a", now - 100, "c1"), r("b", now - 100, "c2"),
               r("c", now - 50), r("future", now + 10)]
    start = DocCursor.catching_up(replies, now)
    assert [x["reply_id"] for x, _ in start.newer(replies)] == ["a", "b", "c", "future"]
    # At most `limit`: the latest ones; a reply earlier in the same second counts as seen.
    start = DocCursor.catching_up(replies, now, limit=2)
    assert start == DocCursor(now - 100, ("a",))
    assert [x["reply_id"] for x, _ in start.newer(replies)] == ["b", "c", "future"]
    assert DocCursor.catching_up([r("old", now - 8 * 86400)], now) == DocCursor(now)
    # `passing` ends where `newer` says the same steps end.
    steps = DocCursor(0).newer(replies)
    assert DocCursor(0).passing([(x["reply_id"], x["create_time"]) for x, _ in steps]) \
        == steps[-1][1]


def test_lark_events_of_another_app_are_foreign():
    lark = Lark({"app_id": "cli_ours", "bot_open_id": "ou_bot", "groups": ["oc_team"]}, {},
                {"open_id": "ou_bot", "app_id": "cli_ours"})
    body = {"header": {"app_id": "cli_theirs"}, "event": {"message": {
        "message_id": "om_1", "chat_id": "oc_team", "chat_type": "group",
        "mentions": [{"key": "@_user_1", "id": {"open_id": "ou_bot"}}]},
        "sender": {"sender_id": {"open_id": "ou_a"}, "sender_type": "user"}}}
    env = lark.envelope("e1", "im.message.receive_v1", body)
    assert lark.translate(env).reason == "foreign_app"
    body["header"]["app_id"] = "cli_ours"
    assert lark.translate(lark.envelope("e2", "im.message.receive_v1", body)).addressed


def _mention(bot: str, chat: str = "oc_team") -> dict:
    return {"header": {"app_id": "cli_ours"}, "event": {"message": {
        "message_id": "om_1", "chat_id": chat, "chat_type": "group",
        "mentions": [{"key": "@_user_1", "id": {"open_id": bot}}]},
        "sender": {"sender_id": {"open_id": "ou_a"}, "sender_type": "user"}}}


def test_lark_mentions_are_admitted_by_the_verified_bot_only():
    """The bot id Lark's bot info stated (for this app) admits mentions; a configured id
    that differs, or none verified, refuses them with a reason; a direct message needs no
    mention and is not refused."""
    config = {"app_id": "cli_ours", "bot_open_id": "ou_bot", "groups": ["oc_team"]}
    verified = {"open_id": "ou_bot", "app_id": "cli_ours"}
    facts = Lark(config, {}, verified).translate(
        Lark(config).envelope("e", "im.message.receive_v1", _mention("ou_bot")))
    assert facts.addressed and not facts.refusal
    # Lark names another bot: the configured id is not trusted, a mention of either refused
    other = {"open_id": "ou_real", "app_id": "cli_ours"}
    for bot in ("ou_bot", "ou_real"):
        facts = Lark(config, {}, other).translate(
            Lark(config).envelope("e", "im.message.receive_v1", _mention(bot, "oc_x")))
        assert (facts.scope, facts.addressed, facts.refusal) == (
            "group_other", False, "bot_identity_mismatch")
    # nothing verified, or verified for an app the source no longer uses
    for profile in (None, {"open_id": "ou_bot", "app_id": "cli_old"}):
        facts = Lark(config, {}, profile).translate(
            Lark(config).envelope("e", "im.message.receive_v1", _mention("ou_bot")))
        assert facts.refusal == "bot_identity_unverified" and not facts.addressed
    # a mention of somebody else is no mention of the bot: nothing to refuse
    facts = Lark(config, {}, other).translate(
        Lark(config).envelope("e", "im.message.receive_v1", _mention("ou_alice")))
    assert facts.refusal == "" and not facts.addressed
    direct = _mention("ou_bot")
    direct["event"]["message"]["chat_type"] = "p2p"
    facts = Lark(config, {}, other).translate(
        Lark(config).envelope("e", "im.message.receive_v1", direct))
    assert facts.addressed and facts.refusal == ""
    # the operator fixes the configuration: admitted by the verified id
    fixed = {**config, "bot_open_id": "ou_real"}
    facts = Lark(fixed, {}, other).translate(
        Lark(fixed).envelope("e", "im.message.receive_v1", _mention("ou_real", "oc_x")))
    assert facts.addressed and facts.scope == "group_other" and not facts.refusal
    # no configured id: the verified one is the only claim
    bare = {k: v for k, v in config.items() if k != "bot_open_id"}
    facts = Lark(bare, {}, other).translate(
        Lark(bare).envelope("e", "im.message.receive_v1", _mention("ou_real")))
    assert facts.addressed and not facts.refusal
