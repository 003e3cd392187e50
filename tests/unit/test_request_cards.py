"""The question and permission cards (pure): Lark card JSON 2.0 in English and Simplified
Chinese, showing what the payload says, and reading a click or a form back."""

from __future__ import annotations

import json

import pytest

from conversations.cards import language
from conversations.cards import permission as permission_card
from conversations.cards import question as question_card
from conversations.cards.words import WORDS

IDS = {"conversation_id": 7, "session_id": 3, "generation": 2}


def _q(**kw):
    return {"id": "q0", "text": "Which color?", "header": "Color", "options": ["red", "blue"],
            "multi_select": False, "allow_custom": True, "sensitive": False, **kw}


def _elements(card, tag):
    found = []

    def walk(items):
        for e in items:
            if e.get("tag") == tag:
                found.append(e)
            walk(e.get("elements") or [])

    walk(card["body"]["elements"])
    return found


def test_both_languages_have_every_word():
    assert set(WORDS["en"]) == set(WORDS["zh-CN"])


def test_language_of_a_source():
    assert language({"domain": "https://open.feishu.cn"}) == "zh-CN"
    assert language({"domain": "https://open.larksuite.com"}) == "en"
    assert language({"domain": "https://open.feishu.cn", "language": "en"}) == "en"


def test_single_select_question_is_buttons_carrying_the_card_identity():
    payload = {"request_id": "r1", "questions": [_q(descriptions={"red": "warm"})],
               "blocking": True}
    card = question_card.render(payload, lang="en", **IDS)
    assert card["schema"] == "2.0" and card["config"] == {"update_multi": True}
    assert card["header"]["title"]["content"] == "Color"
    buttons = _elements(card, "button")
    assert [b["text"]["content"] for b in buttons] == ["red", "blue", "Send answer",
                                                       "Cancel the question"]
    value = buttons[1]["behaviors"][0]["value"]
    assert value == {"amux": "question.answer", "conversation": 7, "session": 3, "gen": 2,
                     "request": "r1", "question": "q0", "option": 1}
    assert question_card.answers_from(payload, value, None) == {"q0": "blue"}
    shown = json.dumps(card, ensure_ascii=False)
    assert "red — warm" in shown and "You may write your own answer." in shown
    # runtime text never goes into markdown
    assert all(e["text"]["tag"] == "plain_text" for e in _elements(card, "div"))


def test_multi_select_sensitive_and_several_questions_are_one_form_in_chinese():
    payload = {"request_id": "r2", "blocking": False, "delivery": "async", "questions": [
        _q(id="sizes", text="Sizes?", options=["S", "L"], multi_select=True,
           allow_custom=False),
        _q(id="token", text="Token?", options=[], sensitive=True)]}
    card = question_card.render(payload, lang="zh-CN", **IDS)
    assert card["header"]["title"]["content"] == "智能体提问"
    (form,) = _elements(card, "form")
    tags = [(f["tag"], f.get("name"), f.get("input_type")) for f in form["elements"]]
    assert tags == [("multi_select_static", "q0_pick", None), ("input", "q1_text", "password"),
                    ("button", "send", None)]
    shown = json.dumps(card, ensure_ascii=False)
    assert "可多选" in shown and "敏感信息" in shown and "可随时回答" in shown
    value = form["elements"][-1]["behaviors"][0]["value"]
    answers = question_card.answers_from(payload, value, {"q0_pick": ["1"], "q1_text": "s3"})
    assert answers == {"sizes": ["L"], "token": "s3"}
    with pytest.raises(question_card.Incomplete):
        question_card.answers_from(payload, value, {"q0_pick": ["1"]})
    answered = json.dumps(question_card.answered(payload, lang="en", operator="ou_a",
                                                 answers=answers))
    assert "s3" not in answered and "Answer: L" in answered and "<at id=ou_a></at>" in answered
    assert not _elements(question_card.answered(payload, lang="en", answers=answers), "button")


def test_released_cards_have_nothing_to_click():
    payload = {"request_id": "r1", "questions": [_q()]}
    card = question_card.released(payload, lang="en", reason="turn")
    assert not _elements(card, "button") and "the turn ended" in json.dumps(card)
    request = {"request_id": "p1", "title": "rm -rf build",
               "options": [{"id": "accept", "label": "accept", "kind": "allow_once"}]}
    stale = permission_card.released(request, lang="zh-CN", reason="stale")
    assert not _elements(stale, "button") and "不能再控制" in json.dumps(stale,
                                                                       ensure_ascii=False)


def test_permission_card_offers_what_the_runtime_offers():
    request = {"request_id": "p1", "title": "rm -rf build", "detail": {"cwd": "/w"},
               "options": [{"id": "allow", "label": "Allow", "kind": "allow_once"},
                           {"id": "always", "label": "Always", "kind": "allow_always"},
                           {"id": "deny", "label": "Deny", "kind": "reject_once"},
                           {"id": "odd", "label": "Something else", "kind": "other"}]}
    card = permission_card.render(request, lang="en", **IDS)
    buttons = _elements(card, "button")
    assert [b["text"]["content"] for b in buttons] == ["Allow once", "Always allow", "Deny",
                                                       "Something else"]
    assert [b["behaviors"][0]["value"]["option"] for b in buttons] == \
        ["allow", "always", "deny", "odd"]
    assert buttons[0]["behaviors"][0]["value"]["amux"] == "permission.answer"
    assert "rm -rf build" in json.dumps(card)
    done = permission_card.answered(request, lang="en", option_id="deny", operator="ou_b")
    assert done["header"]["template"] == "red" and not _elements(done, "button")
