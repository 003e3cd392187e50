"""A native user question from Codex (request_user_input) reaches amux as a typed
question and the answer goes back to the model."""

from __future__ import annotations

import pytest

from runtimes.events import MessageCompleted, QuestionAsked
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
    run_async,
    terminals,
)

pytestmark = pytest.mark.timeout(120)
QUESTIONS = {"questions": [{"id": "color", "header": "Color", "question": "Which color?",
                            "options": [{"label": "red", "description": "warm"},
                                        {"label": "blue", "description": "cool"}]}]}


def test_question_asked_and_answered(tmp_path, model_server):
    require_runtime("codex")
    cfg = make_config("codex", tmp_path, model_server.base_url)
    model_server.script(ToolCall("", tool="request_user_input", arguments=QUESTIONS),
                        Text("thanks"))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()

            async def answer(ev):
                if isinstance(ev, QuestionAsked):
                    await adapter.answer_question(ev.request_id, {"color": "blue"})

            return adapter, await collect(adapter, "ask me", on_event=answer)
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    asked = [e for e in events if isinstance(e, QuestionAsked)]
    assert len(asked) == 1
    q = asked[0].questions[0]
    assert (q.id, q.text, q.options, q.allow_custom) == ("color", "Which color?",
                                                          ("red", "blue"), True)
    assert [t.type for t in terminals(events)] == ["turn.completed"]
    sent_back = str(model_server.tool_requests()[-1].body["input"][-1])
    assert '"color":{"answers":["blue"]}' in sent_back
    assert_no_leak([adapter.tag])


ASYNC_QUESTIONS = {"questions": [{"title": "Which color?", "options": ["red", "blue"]},
                                 {"title": "Anything else?"}]}
# a model whose bundled catalog entry offers request_user_input_async (in the `functions`
# namespace of its additional tools); the scripted model server serves it like any other
ASYNC_MODEL = "gpt-6.2-sol"


def test_async_questions_become_non_blocking_questions(tmp_path, model_server):
    require_runtime("codex")
    wire: list = []
    cfg = make_config("codex", tmp_path, model_server.base_url, model=ASYNC_MODEL,
                      wire_observer=lambda d, m: wire.append((d, m)))
    model_server.script(ToolCall("", tool="request_user_input_async", namespace="functions",
                                 arguments=ASYNC_QUESTIONS),
                        Text("carrying on meanwhile"))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()
            return adapter, await collect(adapter, "ask me and go on")
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    # the real binary's frame: an agentMessage with delivery "async" and its questions
    frame = next(m["params"]["item"] for d, m in wire if d == "in"
                 and m.get("method") == "item/completed"
                 and m["params"]["item"].get("delivery") == "async")
    assert frame["questions"] == [{"title": "Which color?", "options": ["red", "blue"]},
                                  {"title": "Anything else?", "options": None}]
    asked = [e for e in events if isinstance(e, QuestionAsked)]
    assert [(e.blocking, e.delivery) for e in asked] == [(False, "async")] * 2
    assert [(q.text, q.options, q.allow_custom, q.id) for e in asked for q in e.questions] == [
        ("Which color?", ("red", "blue"), True, "q0"), ("Anything else?", (), True, "q1")]
    assert len({e.request_id for e in asked}) == 2
    payload = asked[0].payload()
    assert payload["delivery"] == "async" and payload["blocking"] is False
    # nothing waits for an answer: no provider RPC is pending, the turn went on and ended
    assert adapter.pending_requests == []
    assert not [d for d, m in wire if d == "in" and "id" in m and "method" in m]
    assert [t.type for t in terminals(events)] == ["turn.completed"]
    texts = [e.text for e in events if isinstance(e, MessageCompleted)]
    assert texts == ["carrying on meanwhile"]  # the questions are not repeated as a reply
    assert '"accepted":true' in str(model_server.tool_requests()[-1].body["input"][-1])
    assert_no_leak([adapter.tag])
