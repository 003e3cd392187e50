"""Permission requests: asked, answered, and cancelled by an interrupt."""

from __future__ import annotations

import pytest

from runtimes.events import PermissionAnswered, PermissionRequested, ToolCompleted
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

pytestmark = pytest.mark.timeout(240)
# the model asks to run outside the sandbox, which needs an approval in "ask" mode
ESCALATE = {"sandbox_permissions": "require_escalated", "justification": "needs approval"}


@pytest.mark.parametrize("runtime", ["codex", "acp"])
def test_permission_allowed_runs_the_command(runtime, tmp_path, model_server):
    require_runtime(runtime)
    cfg = make_config(runtime, tmp_path, model_server.base_url, permission_mode="ask")
    model_server.script(ToolCall("echo ok > allowed.txt", extra=ESCALATE),
                        Text("ran it"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()

            async def answer(ev):
                if isinstance(ev, PermissionRequested):
                    allow = next(o for o in ev.options if o.kind == "allow_once")
                    await adapter.answer_permission(ev.request_id, allow.id)

            return adapter, await collect(adapter, "write allowed.txt", on_event=answer)
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    asked = [e for e in events if isinstance(e, PermissionRequested)]
    assert asked, [e.type for e in events]
    assert any(isinstance(e, PermissionAnswered) for e in events)
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    assert (cfg.workdir / "allowed.txt").exists()
    assert_no_leak([adapter.tag])


@pytest.mark.parametrize("runtime", ["codex", "acp"])
def test_interrupt_while_permission_pending_cancels_it_and_the_turn(runtime, tmp_path,
                                                                   model_server):
    require_runtime(runtime)
    cfg = make_config(runtime, tmp_path, model_server.base_url, permission_mode="ask")
    model_server.script(ToolCall("echo no > denied.txt", extra=ESCALATE),
                        Text("should not run"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()

            async def on_event(ev):
                if isinstance(ev, PermissionRequested):
                    await adapter.interrupt()

            return adapter, await collect(adapter, "write denied.txt", on_event=on_event)
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    assert any(isinstance(e, PermissionRequested) for e in events)
    assert [e.type for e in terminals(events)] == ["turn.cancelled"]
    assert not (cfg.workdir / "denied.txt").exists()
    assert not any(isinstance(e, ToolCompleted) and e.status == "completed" for e in events)
    assert_no_leak([adapter.tag])
