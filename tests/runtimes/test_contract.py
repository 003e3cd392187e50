"""The adapter contract, run against each real runtime (Codex app-server, Pi RPC, codex-acp)
pointed at the scripted model server started by the test."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from runtimes.base import tagged_pids
from runtimes.events import MessageCompleted, ToolStarted, UsageObserved
from runtimes.watchdog import WatchdogConfig
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Fail, Text, ToolCall
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
    one_turn,
    run_async,
    terminals,
    types,
)
from tests.support.workers import wait_for

pytestmark = pytest.mark.timeout(240)
RUNTIMES = ["codex", "pi", "acp", "claude"]


@pytest.fixture(params=RUNTIMES)
def runtime(request):
    require_runtime(request.param)
    return request.param


def test_tool_call_then_three_messages_in_one_native_conversation(runtime, tmp_path,
                                                                  model_server):
    cfg = make_config(runtime, tmp_path, model_server.base_url)
    model_server.script(ToolCall("echo hello > out.txt"), Text("wrote it"),
                        Text("second answer"), Text("third answer"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            native = await adapter.start()
            first = await collect(adapter, "write hello to out.txt")
            second = await collect(adapter, "and again")
            third = await collect(adapter, "and once more")
            return adapter, native, first, second, third
        finally:
            await adapter.close()

    adapter, native, first, second, third = run_async(main())
    assert (cfg.workdir / "out.txt").read_text() == "hello\n"
    for events in (first, second, third):
        assert types(events)[0] == "turn.started"
        assert [e.type for e in terminals(events)] == ["turn.completed"]
        assert events[-1].terminal
    assert [e.text for e in first if isinstance(e, MessageCompleted)] == ["wrote it"]
    assert [e.text for e in third if isinstance(e, MessageCompleted)] == ["third answer"]
    assert any(isinstance(e, ToolStarted) for e in first)
    # one native conversation: the last model request carries the earlier user messages
    last_request = str(model_server.tool_requests()[-1].body)
    assert "write hello to out.txt" in last_request and "and again" in last_request
    assert adapter.native_session_id == native
    usage = [e for e in first + second + third if isinstance(e, UsageObserved)]
    lasts = [u.last for u in usage if u.last]
    cumulative = [u.cumulative for u in usage if u.cumulative]
    if runtime == "acp":
        # ACP: only what the agent reports (codex-acp: context use); never a derived total
        assert all(u.cumulative is None for u in usage)
        assert any(u.context_used is not None for u in usage)
    else:
        assert lasts and all(u["input_tokens"] == 100 for u in lasts)
        # the runtime's own running total, taken as reported (4 model calls, 100 input each)
        assert cumulative[-1]["cumulative_input_tokens"] == 400
    assert_no_leak([adapter.tag])


def test_interrupt_mid_turn_gives_exactly_one_cancelled_terminal(runtime, tmp_path,
                                                                 model_server):
    cfg = make_config(runtime, tmp_path, model_server.base_url)
    model_server.script(Text("too slow", delay=30), Text("after the interrupt"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()

            async def interrupt_when_called():
                await asyncio.to_thread(model_server.wait_for_requests, 1)
                await adapter.interrupt()

            task = asyncio.create_task(interrupt_when_called())
            events = await collect(adapter, "take your time")
            await task
            after = await collect(adapter, "are you there?")
            return adapter, events, after
        finally:
            await adapter.close()

    adapter, events, after = run_async(main())
    assert [e.type for e in terminals(events)] == ["turn.cancelled"]
    assert events[-1].type == "turn.cancelled"
    # the next turn is unaffected by the interrupt
    assert [e.type for e in terminals(after)] == ["turn.completed"]
    assert_no_leak([adapter.tag])


def test_a_provider_briefly_unavailable_costs_the_turn_nothing(runtime, tmp_path, model_server):
    """A 503 (a provider's hiccup, or amux's gateway while it restarts) is retried by the
    runtime itself; the turn goes on and ends once, completed, with the answer that came
    after. Pi reports its failed attempt's agent_end before it retries: that is no end."""
    cfg = make_config(runtime, tmp_path, model_server.base_url)
    # three in a row: more than Pi's HTTP client retries itself (2), so Pi's own retry runs
    model_server.script(*[Fail("overloaded, try again", status=503)] * 3,
                        Text("answered after all"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()
            return adapter, await collect(adapter, "are you there?")
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["answered after all"]
    assert len(model_server.tool_requests()) == 4
    assert_no_leak([adapter.tag])


def test_resume_the_same_native_session_from_a_fresh_process(runtime, tmp_path, model_server):
    model_server.script(Text("first"), Text("second"))

    async def main():
        one = adapter_for(runtime, make_config(runtime, tmp_path, model_server.base_url))
        try:
            native = await one.start()
            await collect(one, "remember the word pelican")
        finally:
            await one.close()
        two = adapter_for(runtime, make_config(runtime, tmp_path, model_server.base_url))
        try:
            resumed = await two.start(resume=native)
            events = await collect(two, "what was the word?")
        finally:
            await two.close()
        return one, two, native, resumed, events

    one, two, native, resumed, events = run_async(main())
    assert resumed == native
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    last_request = str(model_server.tool_requests()[-1].body)
    assert "pelican" in last_request and "what was the word?" in last_request
    assert_no_leak([one.tag, two.tag])


def test_killed_mid_turn_then_a_fresh_process_resumes_the_conversation(runtime, tmp_path,
                                                                       model_server):
    """A worker killed with SIGKILL takes its runtime with it (the runtime's own children
    too); a fresh process then resumes the same native conversation, which still holds every
    turn that had completed."""
    model_server.script(Text("noted"), Text("never arrives", delay=60), Text("back again"))

    async def main():
        one = adapter_for(runtime, make_config(runtime, tmp_path, model_server.base_url))
        try:
            native = await one.start()
            first = await collect(one, "remember the word pelican")
            turn = asyncio.create_task(collect(one, "think it over slowly"))
            await asyncio.to_thread(model_server.wait_for_requests, 2)
            os.kill(one.proc.pid, signal.SIGKILL)  # what the worker's death does to it
            await asyncio.to_thread(wait_for, lambda: not tagged_pids(one.tag), 10)
            killed = await turn
        finally:
            await one.close()
        two = adapter_for(runtime, make_config(runtime, tmp_path, model_server.base_url))
        try:
            resumed = await two.start(resume=native)
            after = await collect(two, "what was the word?")
        finally:
            await two.close()
        return one, two, native, first, killed, resumed, after

    one, two, native, first, killed, resumed, after = run_async(main())
    assert [e.type for e in terminals(first)] == ["turn.completed"]
    assert [e.type for e in terminals(killed)] == ["turn.failed"]
    assert resumed == native
    assert [e.type for e in terminals(after)] == ["turn.completed"]
    last_request = str(model_server.tool_requests()[-1].body)
    assert "pelican" in last_request and "what was the word?" in last_request
    assert_no_leak([one.tag, two.tag])


def test_repeated_identical_tool_call_fails_the_turn_at_the_limit(runtime, tmp_path,
                                                                  model_server):
    cfg = make_config(runtime, tmp_path, model_server.base_url,
                      watchdog=WatchdogConfig(repeat_tool_call_limit=3))
    model_server.script(*[ToolCall("echo again >> loop.txt") for _ in range(12)])

    adapter, events = one_turn(runtime, cfg, "loop forever")
    terms = terminals(events)
    assert [e.type for e in terms] == ["turn.failed"]
    assert terms[0].code == "repeat_tool_loop"
    assert 3 <= sum(isinstance(e, ToolStarted) for e in events) <= 4
    assert_no_leak([adapter.tag])


def test_minimal_environment_plus_the_callers_extra_env(runtime, tmp_path, model_server):
    cfg = make_config(runtime, tmp_path, model_server.base_url,
                      extra_env={"AMUX_API_URL": "http://127.0.0.1:1/api/v1",
                                 "HOME": "/should/not/win", "OPENAI_API_KEY": "leak"})
    model_server.script(ToolCall("env > env.txt"), Text("done"))

    adapter, events = one_turn(runtime, cfg, "dump the environment")
    env = dict(line.split("=", 1) for line in
               (cfg.workdir / "env.txt").read_text().splitlines() if "=" in line)
    assert env["AMUX_API_URL"] == "http://127.0.0.1:1/api/v1"
    assert env["HOME"].startswith(str(cfg.state_dir))
    assert "OPENAI_API_KEY" not in env
    for inherited in ("DATABASE_URL", "REDIS_URL", "AMUX_SECRET_KEY", "PYTEST_CURRENT_TEST"):
        assert inherited not in env
    assert_no_leak([adapter.tag])
