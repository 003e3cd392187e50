"""Claude through the Agent SDK sidecar: the real SDK and the CLI it bundles, against the
scripted model server (which logs every request body the CLI sends)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from runtimes import errors
from runtimes.base import tagged_pids
from runtimes.events import (
    MessageCompleted,
    PermissionRequested,
    QuestionAsked,
    ToolCompleted,
    UsageObserved,
)
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Fail, Text, ToolCall
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
    run_async,
    terminals,
    types,
)
from tests.support.workers import wait_for

pytestmark = pytest.mark.timeout(300)

TWO_QUESTIONS = {"questions": [
    {"question": "Which color?", "header": "Color", "multiSelect": False,
     "options": [{"label": "red", "description": "warm"},
                 {"label": "blue", "description": "cold"}]},
    {"question": "Which sizes?", "header": "Size", "multiSelect": True,
     "options": [{"label": "S", "description": "small"}, {"label": "M", "description": "mid"},
                 {"label": "L", "description": "large"}]}]}


@pytest.fixture(autouse=True)
def _installed():
    require_runtime("claude")


def _system_text(body: dict) -> str:
    return json.dumps(body.get("system"))


def test_two_turns_keep_the_conversation_with_the_appended_prompt_and_no_auto_memory(
        tmp_path, model_server):
    model_server.script(ToolCall("env"), Text("first answer"), Text("second answer"))
    cfg = make_config("claude", tmp_path, model_server.base_url,
                      system_prompt="AMUX-PROFILE-PROMPT: answer tersely")

    async def main():
        adapter = adapter_for("claude", cfg)
        try:
            native = await adapter.start()
            first = await collect(adapter, "show me the environment")
            second = await collect(adapter, "say it again")
            return adapter, native, first, second
        finally:
            await adapter.close()

    adapter, native, first, second = run_async(main())
    assert [e.type for e in terminals(first)] == ["turn.completed"]
    assert [e.type for e in terminals(second)] == ["turn.completed"]
    assert [e.text for e in first if isinstance(e, MessageCompleted)] == ["first answer"]
    assert [e.text for e in second if isinstance(e, MessageCompleted)] == ["second answer"]
    requests = model_server.tool_requests()
    assert len(requests) == 3
    # amux's prompt is appended to Claude Code's preset (whose own instructions stay)
    for req in requests:
        assert "AMUX-PROFILE-PROMPT: answer tersely" in _system_text(req.body)
        assert "Claude Code" in _system_text(req.body)
    # the Bash tool's `env` output (the CLI's own environment) reached the next request
    env_result = json.dumps(requests[1].body["messages"][-1])
    assert "CLAUDE_CODE_DISABLE_AUTO_MEMORY=1" in env_result
    assert "CLAUDE_CONFIG_DIR" not in env_result
    # one conversation: the second turn's request carries the first turn
    last = json.dumps(requests[2].body["messages"])
    assert "show me the environment" in last and "first answer" in last \
        and "say it again" in last
    assert adapter.native_session_id == native
    usage = [e for e in first if isinstance(e, UsageObserved)]
    assert any(u.last and u.last["input_tokens"] == 100 for u in usage)
    assert usage[-1].cumulative["cumulative_input_tokens"] == 200  # the SDK's own total
    assert_no_leak([adapter.tag])


def test_resume_after_the_process_is_killed(tmp_path, model_server):
    model_server.script(Text("the word is pelican"), Text("you said pelican"))

    async def main():
        one = adapter_for("claude", make_config("claude", tmp_path, model_server.base_url))
        try:
            native = await one.start()
            await collect(one, "remember the word pelican")
            os.killpg(one.proc.pid, signal.SIGKILL)
            await asyncio.to_thread(wait_for, lambda: not tagged_pids(one.tag), 10)
        finally:
            await one.close()
        two = adapter_for("claude", make_config("claude", tmp_path, model_server.base_url))
        try:
            resumed = await two.start(resume=native)
            events = await collect(two, "which word?")
        finally:
            await two.close()
        return one, two, native, resumed, events

    one, two, native, resumed, events = run_async(main())
    assert resumed == native
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    last = json.dumps(model_server.tool_requests()[-1].body["messages"])
    assert "remember the word pelican" in last and "the word is pelican" in last
    # auto memory stays off on the resumed launch too
    assert two.launch_env()["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == "1"
    assert_no_leak([one.tag, two.tag])


def test_a_permission_request_is_answered(tmp_path, model_server):
    model_server.script(ToolCall("echo allowed > out.txt"), Text("wrote it"))
    cfg = make_config("claude", tmp_path, model_server.base_url, permission_mode="ask")

    async def main():
        adapter = adapter_for("claude", cfg)
        try:
            await adapter.start()

            async def on(ev):
                if isinstance(ev, PermissionRequested):
                    assert adapter.pending_requests == [ev.request_id]
                    await adapter.answer_permission(ev.request_id, "allow")
                    with pytest.raises(errors.UnknownRequest):  # a duplicate answer
                        await adapter.answer_permission(ev.request_id, "allow")

            return adapter, await collect(adapter, "write the file", on_event=on)
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    asked = [e for e in events if isinstance(e, PermissionRequested)]
    assert len(asked) == 1 and asked[0].detail["tool"] == "Bash"
    assert [o.id for o in asked[0].options] == ["allow", "deny"]
    assert types(events).index("permission.requested") < types(events).index("permission.answered")
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    assert (cfg.workdir / "out.txt").read_text().strip() == "allowed"


def test_ask_user_question_with_two_questions_is_answered_together(tmp_path, model_server):
    model_server.script(ToolCall("", tool="AskUserQuestion", arguments=TWO_QUESTIONS),
                        Text("noted"))

    async def main():
        adapter = adapter_for("claude", make_config("claude", tmp_path,
                                                    model_server.base_url))
        asked: list[QuestionAsked] = []
        refused: list[str] = []
        try:
            await adapter.start()

            async def on(ev):
                if not isinstance(ev, QuestionAsked):
                    return
                asked.append(ev)
                if len(asked) < 2:
                    return  # answer both once both are open
                color, sizes = asked
                with pytest.raises(errors.RuntimeAdapterError) as bad:
                    await adapter.answer_question(sizes.request_id, {"q1": []})
                refused.append(bad.value.code)
                await adapter.answer_question(color.request_id, {"q0": "blue"})
                assert model_server.pending == 1  # nothing goes back before both answers
                await adapter.answer_question(sizes.request_id, {"q1": ["S", "L"]})
                with pytest.raises(errors.UnknownRequest):  # late / duplicate
                    await adapter.answer_question(color.request_id, {"q0": "red"})

            return asked, refused, await collect(adapter, "ask me", on_event=on)
        finally:
            await adapter.close()

    asked, refused, events = run_async(main())
    assert [len(q.questions) for q in asked] == [1, 1]
    assert [q.questions[0].text for q in asked] == ["Which color?", "Which sizes?"]
    assert asked[1].questions[0].multi_select and asked[1].questions[0].options == (
        "S", "M", "L")
    assert asked[0].questions[0].descriptions == {"red": "warm", "blue": "cold"}
    assert all(a.blocking for a in asked)
    assert refused == ["invalid_answer"]
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    result = next(e for e in events if isinstance(e, ToolCompleted))
    assert result.status == "completed"
    answered = json.dumps(model_server.tool_requests()[-1].body["messages"][-1])
    assert "Which color?" in answered and "blue" in answered and "S,L" in answered


def test_cancelling_one_question_cancels_the_batch(tmp_path, model_server):
    model_server.script(ToolCall("", tool="AskUserQuestion", arguments=TWO_QUESTIONS),
                        Text("fine, no answers"))

    async def main():
        adapter = adapter_for("claude", make_config("claude", tmp_path,
                                                    model_server.base_url))
        asked: list[QuestionAsked] = []
        try:
            await adapter.start()

            async def on(ev):
                if isinstance(ev, QuestionAsked):
                    asked.append(ev)
                    if len(asked) == 2:
                        await adapter.answer_question(asked[0].request_id, None)
                        assert adapter.pending_requests == []  # the other went with it
                        with pytest.raises(errors.UnknownRequest):
                            await adapter.answer_question(asked[1].request_id, {"q1": ["S"]})

            return await collect(adapter, "ask me", on_event=on)
        finally:
            await adapter.close()

    events = run_async(main())
    assert len([e for e in events if isinstance(e, QuestionAsked)]) == 2
    done = next(e for e in events if isinstance(e, ToolCompleted))
    assert done.status == "failed"  # the CLI was told the question was cancelled
    assert [e.type for e in terminals(events)] == ["turn.completed"]  # and went on
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["fine, no answers"]


def test_an_interrupt_releases_pending_questions(tmp_path, model_server):
    model_server.script(ToolCall("", tool="AskUserQuestion", arguments=TWO_QUESTIONS),
                        Text("not reached"))

    async def main():
        adapter = adapter_for("claude", make_config("claude", tmp_path,
                                                    model_server.base_url))
        asked: list[QuestionAsked] = []
        try:
            await adapter.start()

            async def on(ev):
                if isinstance(ev, QuestionAsked):
                    asked.append(ev)
                    if len(asked) == 1:  # answered one, then interrupted with one open
                        await adapter.answer_question(ev.request_id, {"q0": "red"})
                    else:
                        await adapter.interrupt()

            events = await collect(adapter, "ask me", on_event=on)
            pending = adapter.pending_requests
            late = []
            for question in asked:
                with pytest.raises(errors.UnknownRequest):
                    await adapter.answer_question(question.request_id,
                                                  {question.questions[0].id: ["S"]})
                late.append(question.request_id)
            return adapter, events, pending, late
        finally:
            await adapter.close()

    adapter, events, pending, late = run_async(main())
    assert pending == [] and len(late) == 2  # released; late answers refused
    assert [e.type for e in terminals(events)] == ["turn.cancelled"]
    assert_no_leak([adapter.tag])


def test_an_error_result_fails_the_turn_with_the_reported_error(tmp_path, model_server):
    # every model request of the turn fails (the CLI retries once on its own)
    model_server.responder = lambda body: Fail("scripted: this model is not enabled")

    async def main():
        adapter = adapter_for("claude", make_config("claude", tmp_path,
                                                    model_server.base_url))
        try:
            await adapter.start()
            return await collect(adapter, "hello")
        finally:
            await adapter.close()

    events = run_async(main())
    [terminal] = terminals(events)
    assert terminal.type == "turn.failed"
    assert "scripted: this model is not enabled" in terminal.message


def test_a_model_service_launch_applies_the_gateway_as_flag_settings(tmp_path, model_server):
    """The gateway and key reach the CLI only through the SDK's in-memory flag layer: not
    in any process's argv or environment, not in a settings file."""
    model_server.script(Text("through the gateway"))
    cfg = make_config("claude", tmp_path, model_server.base_url,
                      extra_env={"AMUX_MODEL_SERVICE": "scripted-gateway"})

    async def main():
        adapter = adapter_for("claude", cfg)
        try:
            await adapter.start()
            events = await collect(adapter, "hello")
            exposed = []
            for pid in tagged_pids(adapter.tag):
                for name in ("cmdline", "environ"):
                    with open(f"/proc/{pid}/{name}", "rb") as fh:
                        if b"test-key" in fh.read():
                            exposed.append((pid, name))
            return events, exposed
        finally:
            await adapter.close()

    events, exposed = run_async(main())
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["through the gateway"]
    assert exposed == []
    files = [p for p in Path(cfg.state_dir).rglob("*") if p.is_file()]
    assert not [p for p in files if b"test-key" in p.read_bytes()]
