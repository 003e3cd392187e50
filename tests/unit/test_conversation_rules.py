"""Conversations' pure rules: which place a Lark message belongs to, what an admitted
message does there, the cards' language and what a turn's card shows."""

from __future__ import annotations

from conversations import rules
from conversations.cards import language
from conversations.cards import turn as turn_card
from conversations.rules import Place


def test_a_topic_is_its_thread_id_from_its_first_message_on():
    start = {"chat_id": "oc_1", "chat_type": "group", "message_id": "om_1",
             "thread_id": "omt_1", "root_id": ""}
    reply = {**start, "message_id": "om_2", "root_id": "om_1"}
    assert rules.place_keys("topic", start) == [Place("oc_1", "omt_1")]
    assert rules.place_keys("topic", reply)[0] == Place("oc_1", "omt_1")


def test_a_plain_group_message_starts_a_topic_its_replies_find_by_root():
    plain = {"chat_id": "oc_1", "chat_type": "group", "message_id": "om_1"}
    reply = {"chat_id": "oc_1", "chat_type": "group", "message_id": "om_2",
             "thread_id": "omt_9", "root_id": "om_1"}
    assert rules.place_keys("topic", plain) == [Place("oc_1", "om_1")]
    assert Place("oc_1", "om_1") in rules.place_keys("topic", reply)


def test_a_direct_chat_is_one_conversation_and_the_singleton_is_one_for_the_bot():
    dm = {"chat_id": "oc_dm", "chat_type": "p2p", "message_id": "om_1", "thread_id": "x"}
    assert rules.place_keys("topic", dm) == [Place("oc_dm", "")]
    assert rules.place_keys("singleton", dm) == [Place("", "")]
    assert not rules.in_thread("topic", dm)
    assert rules.in_thread("topic", {"chat_type": "group"})
    assert not rules.in_thread("singleton", {"chat_type": "group"})


def test_only_an_explicit_request_starts_a_conversation():
    assert rules.action("topic", "explicit", False) == (rules.START, None)
    assert rules.action("topic", "explicit", True) == (rules.POST, None)
    assert rules.action("topic", "inferred", False) == (rules.IGNORE, rules.NEEDS_MENTION)
    assert rules.action("topic", "inferred", True) == (rules.POST, None)
    assert rules.action("singleton", "inferred", True) == (rules.IGNORE, rules.NEEDS_MENTION)
    assert rules.action("topic", "ignore", True) == (rules.IGNORE, None)


def test_mode_of_config():
    assert rules.mode_of({}) is None and rules.mode_of({"conversation": "off"}) is None
    assert rules.mode_of({"conversation": "topic"}) == "topic"


def test_card_language_follows_the_setting_then_the_domain():
    assert language({}) == "zh-CN"
    assert language({"domain": "https://open.larksuite.com"}) == "en"
    assert language({"domain": "https://open.feishu.cn", "language": "en"}) == "en"
    assert language({"domain": "http://127.0.0.1:9", "language": "zh-CN"}) == "zh-CN"


def test_a_running_turn_shows_its_latest_text_and_tool_then_its_answer():
    events = [("message.completed", {"text": "looking"}),
              ("tool.started", {"call_id": "c1", "title": "pytest -q"})]
    v = turn_card.view("running", events)
    assert (v.text, v.tool, v.final) == ("looking", "pytest -q", False)
    card = turn_card.render(v, "en")
    assert card["schema"] == "2.0" and card["config"] == {"update_multi": True}
    assert card["header"]["title"]["content"] == "Working…"
    assert [e["content"] for e in card["body"]["elements"]] == ["looking", "Running: pytest -q"]
    done = turn_card.view("completed", [*events, ("tool.completed", {"call_id": "c1"}),
                                        ("message.completed", {"text": "all green"})])
    card = turn_card.render(done, "zh-CN")
    assert card["header"]["title"]["content"] == "回答"
    assert [e["content"] for e in card["body"]["elements"]] == ["all green"]


def test_failed_and_cancelled_are_said_plainly_and_a_web_input_is_quoted():
    failed = turn_card.render(turn_card.view("failed", [("turn.failed", {
        "code": "model_error", "message": "the model refused"})]), "en")
    assert failed["header"]["title"]["content"] == "Failed"
    assert "the model refused" in failed["body"]["elements"][-1]["content"]
    cancelled = turn_card.render(turn_card.view("cancelled", [("turn.cancelled", {
        "reason": "interrupted"})], quote="x" * 500, quote_by="admin"), "en")
    assert cancelled["header"]["title"]["content"] == "Cancelled"
    quote = cancelled["body"]["elements"][0]["content"]
    assert "admin" in quote and quote.endswith("…") and len(quote) < 300
