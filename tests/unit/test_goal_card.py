"""The goal status card: Lark card JSON 2.0 in English and Simplified Chinese, native
usage, budget and elapsed time, and buttons whose values name the goal."""

import json

import pytest

from conversations.cards import goal as card


def _payload(status="active", **goal):
    return {"goal": {"objective": "ship *v2* notes", "status": status, "token_budget": 50000,
                     "tokens_used": 12345, "time_used_seconds": 3725, **goal},
            "goal_key": "k1", "command": None, "location": {"via": "lark"}}


def _buttons(rendered):
    return [col["elements"][0] for el in rendered["body"]["elements"]
            if el["tag"] == "column_set" for col in el["columns"]]


def _text(rendered):
    return "\n".join(el["content"] for el in rendered["body"]["elements"]
                     if el["tag"] == "markdown")


def test_english_card_shows_native_usage_budget_and_time():
    rendered = card.render(_payload(), conversation_id=3, session_id=9, generation=2,
                           lang="en")
    assert rendered["schema"] == "2.0" and rendered["config"] == {"update_multi": True}
    assert rendered["header"]["title"]["content"] == "Goal"
    text = _text(rendered)
    assert "ship \\*v2\\* notes" in text  # the objective's markup stays text
    assert "**Status**: running" in text
    assert "**Tokens used**: 12,345" in text and "**Budget**: 50,000" in text
    assert "**Elapsed**: 1h 02m 05s" in text
    json.dumps(rendered)  # plain JSON


def test_chinese_card():
    rendered = card.render(_payload("paused", token_budget=None), conversation_id=3,
                           session_id=9, generation=2, lang="zh-CN")
    text = _text(rendered)
    assert rendered["header"]["title"]["content"] == "目标"
    assert "**状态**: 已暂停" in text and "**预算**: 未设置" in text
    assert "**已用时间**: 1小时02分05秒" in text and "**已用 tokens**: 12,345" in text
    assert [b["text"]["content"] for b in _buttons(rendered)] == ["继续", "清除"]


@pytest.mark.parametrize("status, kinds", [
    ("active", ["goal.pause", "goal.clear"]),
    ("paused", ["goal.resume", "goal.clear"]),
    ("blocked", ["goal.resume", "goal.clear"]),
    ("budgetLimited", ["goal.resume", "goal.clear"]),
    ("usageLimited", ["goal.resume", "goal.clear"]),
    ("complete", ["goal.clear"]),
])
def test_buttons_follow_the_status_and_name_the_goal(status, kinds):
    rendered = card.render(_payload(status), conversation_id=3, session_id=9, generation=2,
                           lang="en")
    values = [b["behaviors"][0]["value"] for b in _buttons(rendered)]
    assert [v["amux"] for v in values] == kinds
    for value in values:
        assert value == {"amux": value["amux"], "conversation": 3, "session": 9, "gen": 2,
                         "goal_key": "k1"}
        assert _buttons(rendered)[0]["behaviors"][0]["type"] == "callback"


def test_cleared_and_refused_cards():
    cleared = card.render({"goal_key": "k1", "command": "clear", "location": None},
                          conversation_id=3, session_id=9, generation=3, lang="en")
    assert cleared["header"]["title"]["content"] == "Goal cleared" and not _buttons(cleared)
    assert "history is kept" in _text(cleared)
    zh = card.render({"goal_key": "k1"}, conversation_id=3, session_id=9, generation=3,
                     lang="zh-CN")
    assert zh["header"]["title"]["content"] == "目标已清除"
    refused = card.render({"goal": None, "goal_key": "", "command": "pause",
                           "location": None, "refused": "there is no goal"},
                          conversation_id=3, session_id=9, generation=3, lang="en")
    assert "**Not done**: there is no goal" in _text(refused) and not _buttons(refused)


def test_an_inert_card_keeps_its_text_and_loses_its_buttons():
    rendered = card.render(_payload(), conversation_id=3, session_id=9, generation=2,
                           lang="en")
    inert = card.inert(rendered)
    assert _buttons(inert) == [] and _text(inert) == _text(rendered)


def test_elapsed():
    assert card.elapsed(0, "en") == "0s" and card.elapsed(61, "en") == "1m 01s"
    assert card.elapsed(61, "zh-CN") == "1分01秒"


SEVEN = ["goal &lt;text&gt;", "goal", "goal pause", "goal resume", "goal clear",
         "goal set &lt;text&gt;", "goal budget &lt;tokens&gt;"]


def _listed(text):
    """The commands a help card lists, in order (card markdown: `- **<command>** — …`)."""
    return [line[4:line.index("** — ")] for line in text.splitlines()
            if line.startswith("- **")]


def _status_without_goal(**extra):
    return {"goal": None, "goal_key": "", "command": "status", "location": None,
            "generation": 0, "authorized": False, **extra}


def test_status_without_a_goal_lists_the_seven_commands_in_english():
    rendered = card.render(_status_without_goal(), conversation_id=3, session_id=9,
                           generation=2, lang="en")
    text = _text(rendered)
    assert rendered["header"]["title"]["content"] == "Goal"
    assert "No goal is set." in text and "at the very start of a message" in text
    assert _listed(text) == SEVEN
    assert "- **goal budget &lt;tokens&gt;** — set a token budget" in text
    assert "- **goal set &lt;text&gt;** — replace the goal" in text
    assert not _buttons(rendered)  # nothing to pause, resume or clear
    json.dumps(rendered)


def test_status_without_a_goal_lists_the_seven_commands_in_chinese():
    rendered = card.render(_status_without_goal(), conversation_id=3, session_id=9,
                           generation=2, lang="zh-CN")
    text = _text(rendered)
    assert rendered["header"]["title"]["content"] == "目标"
    assert "当前没有目标。" in text and "目标命令（写在消息开头）：" in text
    assert _listed(text) == SEVEN
    assert "- **goal pause** — 暂停目标" in text
    assert "- **goal &lt;text&gt;** — 创建目标并开始" in text
    assert not _buttons(rendered)


def test_a_refusal_without_a_goal_also_says_what_to_type():
    rendered = card.render(_status_without_goal(command="budget",
                                                refused="goal budget needs a number"),
                           conversation_id=3, session_id=9, generation=2, lang="en")
    text = _text(rendered)
    assert "**Not done**: goal budget needs a number" in text and len(_listed(text)) == 7


def test_a_card_with_a_goal_shows_no_help():
    for status in ("active", "paused", "complete"):
        rendered = card.render(_payload(status), conversation_id=3, session_id=9,
                               generation=2, lang="en")
        assert _listed(_text(rendered)) == [] and "No goal" not in _text(rendered)
    # a goal that is being created (no native state yet) is not "no goal" either
    starting = card.render({"goal": None, "goal_key": "k1", "command": "create",
                            "location": None}, conversation_id=3, session_id=9,
                           generation=2, lang="en")
    assert _listed(_text(starting)) == []


def test_the_help_names_every_goal_command_the_parser_takes():
    from sessions import native_goal_commands

    parsed = set()
    for typed, _en, _zh in native_goal_commands.HELP:
        example = typed.replace("<text>", "ship it").replace("<tokens>", "1000")
        command = native_goal_commands.parse(example)
        assert command is not None and command.error is None, typed
        parsed.add(command.verb)
    assert parsed == set(native_goal_commands.VERBS)
