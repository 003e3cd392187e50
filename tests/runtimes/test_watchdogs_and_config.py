"""Turn watchdogs with real runtimes, and ACP config options confirmed or rolled back."""

from __future__ import annotations

import pytest

from runtimes import errors
from runtimes.events import ToolStarted
from runtimes.watchdog import WatchdogConfig
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
    one_turn,
    run_async,
    terminals,
)

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("runtime", ["codex", "acp"])
def test_turn_idle_timeout_fails_the_turn_once(runtime, tmp_path, model_server):
    require_runtime(runtime)
    cfg = make_config(runtime, tmp_path, model_server.base_url,
                      watchdog=WatchdogConfig(turn_idle_timeout_seconds=1))
    model_server.script(Text("far too slow", delay=20))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()
            events = await collect(adapter, "think for a long time")
            return adapter, events, adapter.alive
        finally:
            await adapter.close()

    adapter, events, alive_after = run_async(main())
    terms = terminals(events)
    assert [(t.type, t.code) for t in terms] == [("turn.failed", "turn_idle_timeout")]
    assert events[-1] is terms[0]
    if runtime == "acp":
        assert not alive_after  # ACP: a watchdog stop always retires the process
    assert_no_leak([adapter.tag])


def test_acp_model_option_is_confirmed_or_rolled_back(tmp_path, model_server):
    require_runtime("acp")
    cfg = make_config("acp", tmp_path, model_server.base_url)

    async def main():
        adapter = adapter_for("acp", cfg)
        try:
            await adapter.start()
            before = adapter._option("model").current_value
            values = adapter._values(adapter._option("model"))
            other = next(v for v in values if v != before)
            await adapter.set_model(other)
            switched = adapter._option("model").current_value
            with pytest.raises(errors.ConfigRejected):
                await adapter.set_config("model", "no-such-model")
            after_refusal = adapter._option("model").current_value
            return adapter, before, other, switched, after_refusal
        finally:
            await adapter.close()

    adapter, before, other, switched, after_refusal = run_async(main())
    assert switched == other != before
    assert after_refusal == other  # nothing changed by the refused value
    assert_no_leak([adapter.tag])


@pytest.mark.parametrize("runtime", ["codex", "acp"])
def test_turn_hard_cap_fails_the_turn_once(runtime, tmp_path, model_server):
    require_runtime(runtime)
    cfg = make_config(runtime, tmp_path, model_server.base_url,
                      watchdog=WatchdogConfig(turn_hard_cap_seconds=2,
                                              turn_idle_timeout_seconds=600))
    model_server.script(Text("far too slow", delay=20))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()
            return adapter, await collect(adapter, "work for a long time")
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    terms = terminals(events)
    assert [(t.type, t.code) for t in terms] == [("turn.failed", "turn_hard_cap")]
    assert "longer than 2 s" in terms[0].message
    assert events[-1] is terms[0]
    assert_no_leak([adapter.tag])


def test_codex_tool_without_progress_ends_the_turn_with_tool_idle(tmp_path, model_server):
    """Codex streams a command's output: a command silent for longer than the tool idle
    limit ends the turn (the turn idle limit, longer, does not apply while a tool runs)."""
    require_runtime("codex")
    cfg = make_config("codex", tmp_path, model_server.base_url,
                      watchdog=WatchdogConfig(tool_idle_timeout_seconds=3,
                                              turn_idle_timeout_seconds=600))
    model_server.script(ToolCall("echo start; sleep 1; echo tick; sleep 60"), Text("late"))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()
            return adapter, await collect(adapter, "run the slow thing")
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    terms = terminals(events)
    assert [(t.type, t.code) for t in terms] == [("turn.failed", "tool_idle_timeout")]
    assert "without progress for 3 s" in terms[0].message
    assert any(isinstance(e, ToolStarted) for e in events)
    assert_no_leak([adapter.tag])


def test_acp_tool_idle_has_no_effect_and_a_running_tool_pauses_turn_idle(tmp_path,
                                                                         model_server):
    """ACP gives no tool progress: a silent tool longer than both idle limits still
    completes (only the hard cap bounds it)."""
    require_runtime("acp")
    cfg = make_config("acp", tmp_path, model_server.base_url,
                      watchdog=WatchdogConfig(tool_idle_timeout_seconds=1,
                                              turn_idle_timeout_seconds=3))
    model_server.script(ToolCall("sleep 6; echo finished"), Text("all done"))

    adapter, events = one_turn("acp", cfg, "run the slow thing")
    assert [t.type for t in terminals(events)] == ["turn.completed"]
    assert any(isinstance(e, ToolStarted) for e in events)
    assert_no_leak([adapter.tag])
