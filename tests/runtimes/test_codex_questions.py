"""A native user question from Codex (request_user_input) reaches amux as a typed
question and the answer goes back to the model."""

from __future__ import annotations

import pytest

from sessions.runtimes.events import QuestionAsked
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
