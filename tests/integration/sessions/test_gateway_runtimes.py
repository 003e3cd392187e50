"""The real runtimes behind amux's model gateway (Codex, Pi, Claude, and codex-acp as the
ACP agent): each is launched as a session's host
launches it (services.runtime_config: the gateway's URL and a session credential), completes
a turn with a tool call against the scripted provider, and the provider's key is nowhere the
agent can read — not in the runtime's environment (/proc/<pid>/environ of every process of
its group), its command line, the config files amux generated under the session's state
directory, nor its work directory. A cap reached mid-turn stops the turn's next request."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtimes import get_adapter
from runtimes.base import tagged_pids
from sessions import services
from sessions.models import Session
from sessions.new_session import Launch
from tests import factories as f
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import collect, run_async, terminals
from tests.support.sessions import wait_for_tokens
from tickets import read
from tickets.models import AgentSettings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

KEY = "sk-test-secret"
MODELS = {"codex": "gpt-5.5", "pi": "scripted-model", "claude": "claude-sonnet-4-5",
          "acp": "gpt-5.5"}


def _require(runtime: str) -> None:
    probe = get_adapter(runtime).probe()
    if not probe.installed:
        pytest.skip(f"runtime {runtime} not installed here: {probe.error}")


def _provider(runtime: str, model_server):
    from sessions.models import ProviderProfile

    anthropic = runtime == "claude"
    provider = ProviderProfile.objects.create(
        slug="scripted", platform="anthropic-compat" if anthropic else "openai-compat",
        base_url=model_server.root_url if anthropic else model_server.base_url,
        model_names=[MODELS[runtime]])
    provider.secrets = {"api_key": KEY}
    provider.save()
    return provider


def _leaks(pids: list[int], roots: list[Path]) -> list[str]:
    """Where the provider's key shows: a process's environment or command line, or a file."""
    found = []
    for pid in pids:
        for name in ("environ", "cmdline"):
            try:
                if KEY.encode() in Path(f"/proc/{pid}/{name}").read_bytes():
                    found.append(f"/proc/{pid}/{name}")
            except OSError:
                pass
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink() and KEY.encode() in \
                        path.read_bytes():
                    found.append(str(path))
            except OSError:
                pass
    return found


def _session(runtime, model_server):
    """A session of ``runtime`` on a provider of the scripted model server (skipped when the
    runtime is not installed)."""
    _require(runtime)
    provider = _provider(runtime, model_server)
    return services.create_session(Launch.direct(runtime=runtime, provider=provider.slug,
                                                 model=MODELS[runtime]))


def _environ(pid: int) -> bytes | None:
    """A process's environment, or None when it has ended meanwhile (a tool's child)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None


@pytest.mark.parametrize("runtime", ["codex", "pi", "claude", "acp"])
def test_a_turn_through_the_gateway_leaves_no_provider_key_with_the_runtime(
        runtime, session_dirs, model_server):
    session = _session(runtime, model_server)
    config = services.runtime_config(Session.objects.get(pk=session.pk))
    assert "/gateway/model/" in config.provider.base_url and KEY not in repr(config.__dict__)
    model_server.script(ToolCall("env > seen-env.txt; echo done"), Text("All done."))
    seen: dict[str, list] = {}

    async def main():
        adapter = get_adapter(runtime)(config)
        try:
            await adapter.start()

            def look(event):
                if event.type == "tool.started" and "pids" not in seen:
                    pids = tagged_pids(adapter.tag)
                    server = getattr(adapter, "server", None)
                    if server is not None:  # a thread of a shared app-server (private-home)
                        pids = [*pids, *tagged_pids(server.tag)]
                    seen["pids"] = pids
                    seen["environ"] = [env for env in map(_environ, pids) if env is not None]
                    seen["leaks"] = _leaks(pids, [config.state_dir, config.workdir])

            return await collect(adapter, "run the command", on_event=look)
        finally:
            await adapter.close()

    events = run_async(main())
    assert [e.type for e in terminals(events)] == ["turn.completed"], events
    assert seen.get("pids"), "the runtime's processes were not seen during the turn"
    credential = config.provider.api_key.encode()
    if config.shared_app_server and runtime == "codex":
        # a shared process holds no session's credential: it goes with the thread only
        assert seen["environ"] and not any(credential in env for env in seen["environ"])
    else:
        # the scan is real: the session credential is there, where the key used to be
        assert any(credential in env for env in seen["environ"])
    assert seen["leaks"] == []
    assert _leaks([], [config.state_dir, config.workdir]) == []  # nor after the turn
    requests = model_server.tool_requests()
    assert len(requests) >= 2  # the tool call and the answer after it, both via amux
    for request in requests:
        sent = request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
        assert KEY in sent and config.provider.api_key not in sent
    # each model request's 110 tokens counted once (the runtime's own reports add nothing)
    wait_for_tokens(session, 110 * len(model_server.requests))


@pytest.mark.parametrize("runtime", ["codex", "pi", "claude"])
def test_a_cap_reached_mid_turn_stops_the_next_request_and_blocks_the_ticket(
        runtime, session_dirs, model_server):
    session = _session(runtime, model_server)
    ticket = f.TicketFactory(session=Session.objects.get(pk=session.pk))
    agents = AgentSettings.current()
    agents.ticket_token_cap = 100  # the first model call spends 110
    agents.save()
    config = services.runtime_config(Session.objects.get(pk=session.pk))
    model_server.script(ToolCall("echo step one"), Text("never sent"))

    async def main():
        adapter = get_adapter(runtime)(config)
        try:
            await adapter.start()
            return await collect(adapter, "work in two steps", timeout=90)
        finally:
            await adapter.close()

    started = time.monotonic()
    events = run_async(main())
    # the turn ends failed at once: 429 with `x-should-retry: false`, not retried for minutes
    assert [e.type for e in terminals(events)] == ["turn.failed"]
    assert time.monotonic() - started < 30
    assert len(model_server.tool_requests()) == 1  # the second step never left amux
    assert model_server.pending == 1
    stage, label = read.stages([ticket])[ticket.pk]
    assert (stage, label) == ("blocked", "Blocked — the ticket's token cap (100) is reached")
