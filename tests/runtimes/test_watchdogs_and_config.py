"""Turn watchdogs with real runtimes, and ACP config options confirmed or rolled back."""

from __future__ import annotations

import pytest

from sessions.runtimes import errors
from sessions.runtimes.watchdog import WatchdogConfig
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
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
