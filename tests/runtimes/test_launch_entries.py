"""The session-schedule entry and the memory protocol with the real runtimes: configured at
launch (Codex's developerInstructions, Claude's appended system prompt, Pi's extension),
they reach the model request, the launch context is in the runtime's environment, and the
workspace — with its rule files — is left untouched. Generic ACP has no native channel:
it gets neither and its capabilities say so."""

from __future__ import annotations

import hashlib
import json

import pytest

from runtimes import get_adapter, launch_context
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text
from tests.support.runtimes import adapter_for, collect, make_config, run_async, terminals

pytestmark = pytest.mark.timeout(240)
RULE_FILES = {"AGENTS.md": "# Rules\nBe brief.\n", "CLAUDE.md": "# Claude rules\n",
              ".pi/settings.json": "{}\n"}


def _tree(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _launch(runtime, cfg, model_server):
    for name, text in RULE_FILES.items():
        (cfg.workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (cfg.workdir / name).write_text(text)
    before = _tree(cfg.workdir)
    model_server.script(Text("ok"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()
            with open(f"/proc/{adapter.proc.pid}/environ", "rb") as fh:
                env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0")
                           if b"=" in item)
            events = await collect(adapter, "hello")
            return adapter, env, events
        finally:
            await adapter.close()

    adapter, env, events = run_async(main())
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    assert _tree(cfg.workdir) == before  # rule files and everything else untouched
    requests = [json.dumps(r.body) for r in model_server.requests if r.has_tools]
    assert requests
    return adapter, env, requests


@pytest.mark.parametrize("runtime", ["codex", "claude", "pi"])
def test_the_schedule_entry_reaches_the_model_and_the_workspace_is_untouched(
        runtime, tmp_path, model_server):
    """A runtime launched outside amux's sessions, with neither amux's MCP server nor the
    `amux` command: the entry says there is no channel. Every amux session has one (`mcp`,
    or `cli` for Pi: tests/integration/sessions/test_session_mcp_runtime.py)."""
    require_runtime(runtime)
    cfg = make_config(runtime, tmp_path, model_server.base_url, system_prompt="Be a worker.")
    adapter, env, requests = _launch(runtime, cfg, model_server)
    chan = "unavailable"
    first = requests[0]
    assert f"<{launch_context.SKILL}>" in first
    assert str(launch_context.GUIDE) in first
    assert "reuse-session, new-session-per-run, subtask" in first
    assert "amux-memory" not in first  # memory is off unless bound
    context = json.loads(env[launch_context.CONTEXT_ENV.encode()])
    assert context == {"skill": launch_context.SKILL, "guide": str(launch_context.GUIDE),
                       "channel": chan, "role": "session"}
    assert launch_context.GUIDE.is_file()
    assert not str(launch_context.GUIDE).startswith(str(cfg.workdir))


@pytest.mark.parametrize("runtime", ["codex", "claude", "pi"])
def test_a_task_child_gets_the_restricted_role_and_memory_protocol(runtime, tmp_path,
                                                                   model_server):
    require_runtime(runtime)
    cfg = make_config(runtime, tmp_path, model_server.base_url, role="task", memory=True)
    adapter, env, requests = _launch(runtime, cfg, model_server)
    first = requests[0]
    assert "task's child session: you cannot start sessions or schedules" in first
    assert "<amux-memory>" in first and "memory_search" in first
    assert json.loads(env[launch_context.CONTEXT_ENV.encode()])["channel"] == "none"
    if runtime == "codex":
        config = (cfg.state_dir / "home" / ".codex" / "config.toml").read_text()
        assert "[memories]\ngenerate_memories = false\nuse_memories = false" in config
    if runtime == "claude":
        assert env[b"CLAUDE_CODE_DISABLE_AUTO_MEMORY"] == b"1"


def test_generic_acp_gets_neither_and_says_so(tmp_path, model_server):
    require_runtime("acp")
    assert get_adapter("acp").launch_capabilities() == {"session_schedule": False,
                                                        "memory": False}
    for name in ("codex", "claude", "pi"):
        assert get_adapter(name).launch_capabilities() == {"session_schedule": True,
                                                           "memory": True}
    cfg = make_config("acp", tmp_path, model_server.base_url, memory=True)
    adapter, env, requests = _launch("acp", cfg, model_server)
    assert all(launch_context.SKILL not in r and "amux-memory" not in r for r in requests)
    assert launch_context.CONTEXT_ENV.encode() not in env
