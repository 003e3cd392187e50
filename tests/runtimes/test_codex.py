"""Codex app-server, the real binary, against the scripted model server."""

from __future__ import annotations

import asyncio

import pytest

from sessions.runtimes.events import MessageCompleted, ToolStarted, UsageObserved
from sessions.runtimes.watchdog import WatchdogConfig
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
    terminals,
    types,
)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def _installed():
    require_runtime("codex")


def test_tool_call_writes_file_then_two_more_messages_in_one_thread(tmp_path, model_server):
    cfg = make_config("codex", tmp_path, model_server.base_url)
    model_server.script(ToolCall("echo hello > out.txt"), Text("wrote it"),
                        Text("second answer"), Text("third answer"))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            thread = await adapter.start()
            first = await collect(adapter, "write hello to out.txt")
            second = await collect(adapter, "and again")
            third = await collect(adapter, "and once more")
            return adapter, thread, first, second, third
        finally:
            await adapter.close()

    adapter, thread, first, second, third = asyncio.run(main())
    assert (cfg.workdir / "out.txt").read_text() == "hello\n"
    for events in (first, second, third):
        assert types(events)[0] == "turn.started"
        assert [e.type for e in terminals(events)] == ["turn.completed"]
        assert events[-1].terminal
    assert [e.text for e in first if isinstance(e, MessageCompleted)] == ["wrote it"]
    assert [e.text for e in third if isinstance(e, MessageCompleted)] == ["third answer"]
    assert any(isinstance(e, ToolStarted) and "out.txt" in (e.title or "") for e in first)
    # one native conversation: the third request carries all earlier user messages
    last_input = str(model_server.tool_requests()[-1].body["input"])
    assert "write hello to out.txt" in last_input and "and again" in last_input
    assert adapter.native_session_id == thread
    # usage: last per call, cumulative = the runtime's own running total
    usage = [e for e in first + second + third if isinstance(e, UsageObserved)]
    assert usage[0].last["input_tokens"] == 100
    assert usage[0].cumulative["cumulative_input_tokens"] == 100
    assert usage[-1].last["input_tokens"] == 100
    assert usage[-1].cumulative["cumulative_input_tokens"] == 100 * len(usage)
    assert_no_leak([adapter.tag])


def test_interrupt_mid_turn_gives_one_cancelled_terminal(tmp_path, model_server):
    cfg = make_config("codex", tmp_path, model_server.base_url)
    model_server.script(Text("too slow", delay=30))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()

            async def interrupt_when_called():
                await asyncio.to_thread(model_server.wait_for_requests, 1)
                await adapter.interrupt()

            task = asyncio.create_task(interrupt_when_called())
            events = await collect(adapter, "take your time")
            await task
            return adapter, events
        finally:
            await adapter.close()

    adapter, events = asyncio.run(main())
    assert [e.type for e in terminals(events)] == ["turn.cancelled"]
    assert events[-1].type == "turn.cancelled"
    assert_no_leak([adapter.tag])


def test_resume_same_thread_from_a_fresh_process(tmp_path, model_server):
    cfg = make_config("codex", tmp_path, model_server.base_url)
    model_server.script(Text("first"), Text("second"))

    async def main():
        one = adapter_for("codex", cfg)
        try:
            thread = await one.start()
            await collect(one, "remember the word pelican")
        finally:
            await one.close()
        two = adapter_for("codex", make_config("codex", tmp_path, model_server.base_url))
        try:
            resumed = await two.start(resume=thread)
            events = await collect(two, "what was the word?")
        finally:
            await two.close()
        return one, two, thread, resumed, events

    one, two, thread, resumed, events = asyncio.run(main())
    assert resumed == thread
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    assert "pelican" in str(model_server.tool_requests()[-1].body["input"])
    assert_no_leak([one.tag, two.tag])


def test_repeated_identical_tool_call_fails_turn_at_limit(tmp_path, model_server):
    cfg = make_config("codex", tmp_path, model_server.base_url,
                      watchdog=WatchdogConfig(repeat_tool_call_limit=3))
    model_server.script(*[ToolCall("echo again >> loop.txt") for _ in range(10)])

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()
            return adapter, await collect(adapter, "loop forever")
        finally:
            await adapter.close()

    adapter, events = asyncio.run(main())
    terms = terminals(events)
    assert [e.type for e in terms] == ["turn.failed"]
    assert terms[0].code == "repeat_tool_loop"
    assert sum(isinstance(e, ToolStarted) for e in events) == 3
    assert_no_leak([adapter.tag])
