"""The pure side of the Claude SDK adapter: results, usage and AskUserQuestion answers."""

from __future__ import annotations

import pytest

from runtimes.answers import AnswerRefused, check_payload_answers
from runtimes.claude_sdk import (
    check_answer,
    native_answers,
    result_terminal,
    result_usage,
    split_questions,
)

ASK = {"questions": [
    {"question": "Which color?", "header": "Color", "multiSelect": False,
     "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}]},
    {"question": "Which sizes?", "header": "Size", "multiSelect": True,
     "options": [{"label": "S", "description": ""}, {"label": "L", "description": ""}]}]}


def test_a_result_with_is_error_or_another_subtype_fails_with_the_reported_error():
    assert result_terminal({"subtype": "success", "is_error": False,
                            "stop_reason": "end_turn"}).type == "turn.completed"
    failed = result_terminal({"subtype": "success", "is_error": True,
                              "result": "API Error: 400 bad model"})
    assert failed.type == "turn.failed" and failed.message == "API Error: 400 bad model"
    maxed = result_terminal({"subtype": "error_max_turns", "is_error": False,
                             "errors": ["reached the turn limit"]})
    assert maxed.type == "turn.failed" and maxed.code == "claude_error_max_turns"
    assert maxed.message == "reached the turn limit"


def test_result_usage_is_the_sdks_running_total_as_reported():
    usage = result_usage({"modelUsage": {"m": {"inputTokens": 200, "outputTokens": 20,
                                               "contextWindow": 200000}},
                          "total_cost_usd": 0.5})
    assert usage.cumulative == {"cumulative_input_tokens": 200,
                                "cumulative_output_tokens": 20}
    assert usage.context_window == 200000 and usage.cost["amount"] == 0.5
    assert result_usage({}) is None


def test_each_question_is_its_own_request_and_answers_go_back_by_question_text():
    color, sizes = split_questions(ASK)
    assert (color.id, color.options, color.multi_select) == ("q0", ("red", "blue"), False)
    assert sizes.multi_select
    answers = [check_answer(color, {"q0": "blue"}), check_answer(sizes, {"q1": ["S", "L"]})]
    updated = native_answers(ASK, [color, sizes], answers)
    assert updated["questions"] == ASK["questions"]
    assert updated["answers"] == {"Which color?": "blue", "Which sizes?": ["S", "L"]}


@pytest.mark.parametrize("answers", [{}, {"q1": []}, {"q1": [""]}, {"q1": 3}, "S"])
def test_an_answer_that_does_not_fit_is_refused(answers):
    _, sizes = split_questions(ASK)
    with pytest.raises(AnswerRefused):
        check_answer(sizes, answers)


def test_labels_outside_the_options_are_refused_only_without_custom_answers():
    payload = [{"id": "color", "options": ["red", "blue"], "allow_custom": False}]
    check_payload_answers(payload, {"color": "red"})
    with pytest.raises(AnswerRefused, match="not one of"):
        check_payload_answers(payload, {"color": "green"})
    check_payload_answers([{"id": "color", "options": ["red"], "allow_custom": True}],
                          {"color": "green"})
