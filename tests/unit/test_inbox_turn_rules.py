"""The async inbox's own turns, pure rules (goals/core/inbox_turns.py): what a managed agent
does next, the prompt an inbox turn carries and how its answer is read."""

import json

import pytest

from goals.core import inbox_turns as rules

IDLE = {"managed": True, "live": True, "ordinary_in_flight": False,
        "inbox_in_flight": False, "drainable": 0, "reply_due": False,
        "ordinary_next": False}


@pytest.mark.parametrize(("change", "expected"), [
    ({}, None),
    ({"drainable": 2}, "inbox"),                           # an idle agent drains
    ({"ordinary_next": True}, "turn"),
    ({"drainable": 2, "ordinary_next": True}, "turn"),     # a message waits for a pause
    ({"drainable": 1, "reply_due": True, "ordinary_next": True}, "inbox"),  # preempts
    ({"drainable": 1, "reply_due": True, "ordinary_in_flight": True}, None),  # one at a time
    ({"drainable": 1, "reply_due": True, "inbox_in_flight": True}, None),
    ({"drainable": 1, "reply_due": True, "live": False}, None),
    ({"drainable": 1, "reply_due": True, "managed": False}, None),  # attached: its own loop
])
def test_next_step(change, expected):
    assert rules.next_step(**{**IDLE, **change}) == expected


def block(*entries) -> str:
    return "Done.\n```json\n" + json.dumps({"settle": list(entries)}) + "\n```"


def test_parse_takes_the_last_block_and_only_this_turns_events():
    effect = {"kind": "no_follow_up", "rationale": "status only"}
    answer = ("draft:\n```json\n{\"settle\": []}\n```\n"
              + block({"event": 4, "effect": effect, "reply": "ok"},
                      {"event": 99, "effect": effect}))
    parsed = rules.parse(answer, [4, 5])
    assert parsed.settles == {4: rules.Settle(effect, "ok")}
    assert parsed.problems == {} and parsed.error == ""


@pytest.mark.parametrize(("entry", "problem"), [
    ({"event": 4, "effect": {"kind": "todo", "title": "x"}, "note": "?"},
     "unknown member 'note'"),
    ({"event": 4, "effect": {"kind": "shrug"}}, "effect.kind must be one of"),
    ({"event": 4, "effect": "todo"}, "effect.kind must be one of"),
    ({"event": 4, "effect": {"kind": "todo", "title": "x"}, "reply": 3}, "reply must be text"),
])
def test_parse_refuses_a_bad_entry_by_name(entry, problem):
    parsed = rules.parse(block(entry), [4])
    assert parsed.settles == {} and parsed.problems[4].startswith(problem)


def test_parse_refuses_two_entries_for_one_event_and_answers_without_a_block():
    effect = {"kind": "no_follow_up", "rationale": "x"}
    twice = rules.parse(block({"event": 4, "effect": effect}, {"event": 4, "effect": effect}),
                        [4])
    assert twice.settles == {} and twice.problems == {4: "two entries for one event"}
    assert rules.parse("Noted.", [4]).error == "the answer has no json settle block"
    assert rules.parse(block(), [4]).settles == {}
    assert rules.parse('```json\n{"settle": [], "more": 1}\n```', [4]).error.startswith(
        "the settle block must be")
    blank = rules.parse(block({"event": 4, "effect": effect, "reply": "  "}), [4])
    assert blank.settles[4].reply is None


def test_the_prompt_shows_each_event_and_says_what_to_answer():
    text = rules.prompt("Ship it", [
        rules.EventView(7, "mention", "can you ship?", "ou_a", True, True),
        rules.EventView(8, "message", "x" * (rules.TEXT_CAP + 10), "", False, False)])
    assert "Event 7 (mention, reply due: answer it, reply possible) from ou_a:" in text
    assert "Event 8 (message, read-only: no reply) from someone:" in text
    assert "x" * rules.TEXT_CAP + " […]" in text and "x" * (rules.TEXT_CAP + 1) not in text
    assert '{"settle": [{"event": <id>' in text and "pending_decision" in text


def test_keys():
    assert rules.agent_key(3) == "agent:3"
    assert rules.turn_key("inbox-ab") == "turn:inbox-ab"
    assert rules.is_inbox_turn("inbox-ab") and not rules.is_inbox_turn("loopx-t1")
    assert not rules.is_inbox_turn(None)
