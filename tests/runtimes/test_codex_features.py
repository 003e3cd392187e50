"""The Codex features probe with the real binary: ``codex features list`` decides whether
``request_user_input`` is on; an explicit native flag skips it; a probe that hangs is
stopped and reaped without touching the agent; results are never shared between sessions.

A wrapper in a private runtimes directory stands in for the binary where a test needs to
see or steer its invocations: it logs each one and runs the real binary, except where the
test asks it to hang (``features``) or hide the feature from the listing."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from runtimes import codex_features, errors
from runtimes.base import default_runtimes_dir, tagged_pids
from runtimes.codex import codex_binary
from runtimes.events import MessageCompleted, QuestionAsked
from tests.runtimes.conftest import require_runtime
from tests.support import isolation
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
    run_async,
    terminals,
)

pytestmark = pytest.mark.timeout(180)
QUESTIONS = {"questions": [{"id": "color", "header": "Color", "question": "Which color?",
                            "options": [{"label": "red", "description": "warm"},
                                        {"label": "blue", "description": "cool"}]}]}

WRAPPER = """#!/bin/sh
# test stand-in for codex: log the call, then behave as the test asked
echo "$* CODEX_HOME=$CODEX_HOME TAG=$AMUX_RUNTIME_TAG" >> {log}
if [ "$1" = "features" ] && [ -n "$WRAP_HANG_FEATURES" ]; then
  trap '' TERM          # ignore the polite stop: the probe must be killed
  sleep 300 &           # a child in the probe's group, reaped with it
  while :; do sleep 1; done
fi
if [ "$1" = "features" ] && [ -n "$WRAP_HIDE_FEATURE" ]; then
  {real} "$@" | grep -v default_mode_request_user_input
  exit 0
fi
if [ "$1" = "app-server" ] && [ -n "$WRAP_FAIL_APP_SERVER" ]; then
  sleep 1               # long enough for the probe to be running
  exit 3
fi
exec {real} "$@"
"""


@pytest.fixture(autouse=True)
def _installed():
    require_runtime("codex")


def wrapped(**overrides):
    """make_config's settings for a session whose codex is the logging wrapper: under
    bwrap the wrapper could neither run the real codex (outside the wrapper's runtimes
    directory) nor append to the log (the sandbox shows /tmp as its own), so these runs
    take linux-dac's user, which is what the probe's logic needs; the probe inside bwrap
    is the one every other Codex test runs."""
    if isolation.backend() == "bwrap":
        overrides.setdefault("isolation", "linux-dac")
    return overrides


def wrapped_runtimes(base: Path) -> tuple[Path, Path]:
    """A runtimes directory whose codex is the logging wrapper; (directory, log file)."""
    runtimes = base / "runtimes"
    script = codex_binary(runtimes)
    script.parent.mkdir(parents=True)
    log = base / "calls.log"
    log.touch()
    log.chmod(0o666)  # the runtime user (linux-dac) appends to it
    script.write_text(WRAPPER.format(log=log, real=codex_binary(default_runtimes_dir())))
    script.chmod(0o755)
    for directory in [runtimes, *script.relative_to(runtimes).parents]:
        path = runtimes / directory
        path.chmod(path.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
    isolation.reachable(script.parent)
    return runtimes, log


def calls(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines() if line.strip()]


def _thread_params(wire: list) -> list[dict]:
    return [m["params"] for d, m in wire
            if d == "out" and m.get("method") in ("thread/start", "thread/resume")]


def _ask_and_answer(adapter, answer: dict | None):
    async def on(ev):
        if isinstance(ev, QuestionAsked) and answer is not None:
            await adapter.answer_question(ev.request_id, answer)

    return collect(adapter, "ask me", on_event=on)


def test_the_probe_declares_the_feature_and_a_question_reaches_amux(tmp_path, model_server):
    wire: list = []
    cfg = make_config("codex", tmp_path, model_server.base_url,
                      wire_observer=lambda d, m: wire.append((d, m)))
    model_server.script(ToolCall("", tool="request_user_input", arguments=QUESTIONS),
                        Text("thanks"))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            native = await adapter.start()
            events = await _ask_and_answer(adapter, {"color": "blue"})
            await adapter.clear()
        finally:
            await adapter.close()
        resumed = adapter_for("codex", cfg)
        try:
            assert await resumed.start(resume=native) == native
        finally:
            await resumed.close()
        return adapter, events, resumed

    adapter, events, resumed = run_async(main())
    assert adapter.user_input.enabled and adapter.user_input.by == codex_features.BY_PROBE
    assert adapter.facts()["request_user_input"]["by"] == "probe"
    # new, cleared and resumed threads all carry the feature as a thread config override
    assert [m["method"] for d, m in wire if d == "out" and m.get("method") in (
        "thread/start", "thread/resume")] == ["thread/start", "thread/start", "thread/resume"]
    assert [p.get("config") for p in _thread_params(wire)] == [
        {codex_features.THREAD_CONFIG_KEY: True}] * 3
    assert resumed.user_input.by == codex_features.BY_PROBE  # probed again for itself
    assert resumed.probe_tag != adapter.probe_tag
    asked = [e for e in events if isinstance(e, QuestionAsked)]
    assert len(asked) == 1
    assert asked[0].blocking is False  # the pinned Codex asks with isBlocking: false
    q = asked[0].questions[0]
    assert (q.id, q.text, q.options) == ("color", "Which color?", ("red", "blue"))
    assert q.descriptions == {"red": "warm", "blue": "cool"}
    assert asked[0].payload()["questions"][0]["descriptions"] == {"red": "warm", "blue": "cool"}
    assert [t.type for t in terminals(events)] == ["turn.completed"]
    sent_back = str(model_server.tool_requests()[-1].body["input"][-1])
    assert '"color":{"answers":["blue"]}' in sent_back
    assert adapter.probe_tag and adapter.probe_tag != adapter.tag
    assert_no_leak([adapter.tag, adapter.probe_tag, resumed.tag, resumed.probe_tag])


def test_an_explicit_flag_skips_the_probe(tmp_path, model_server):
    runtimes, log = wrapped_runtimes(tmp_path)
    wire: list = []
    cfg = make_config("codex", tmp_path, model_server.base_url,
                      **wrapped(runtimes_dir=runtimes),
                      extra_args=("-c", f"{codex_features.THREAD_CONFIG_KEY}=true"),
                      wire_observer=lambda d, m: wire.append((d, m)))
    model_server.script(ToolCall("", tool="request_user_input", arguments=QUESTIONS),
                        Text("thanks"))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()
            return adapter, await _ask_and_answer(adapter, {"color": "red"})
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    assert calls(log) == ["app-server"]  # no probe process ran
    assert adapter.probe_tag is None and adapter.user_input.by == codex_features.BY_FLAG
    assert "config" not in _thread_params(wire)[0]  # Codex applies its own flag
    assert len([e for e in events if isinstance(e, QuestionAsked)]) == 1
    assert '"color":{"answers":["red"]}' in str(
        model_server.tool_requests()[-1].body["input"][-1])
    assert_no_leak([adapter.tag])


def test_a_hanging_probe_is_reaped_and_the_agent_keeps_running(tmp_path, model_server):
    runtimes, log = wrapped_runtimes(tmp_path)
    cfg = make_config("codex", tmp_path, model_server.base_url,
                      **wrapped(runtimes_dir=runtimes),
                      extra_env={"WRAP_HANG_FEATURES": "1"})
    model_server.script(ToolCall("", tool="request_user_input", arguments=QUESTIONS),
                        Text("went on without asking"))

    async def main():
        adapter = adapter_for("codex", cfg)
        adapter.features_probe_timeout = 1.5
        try:
            began = time.monotonic()
            await adapter.start()
            took = time.monotonic() - began
            probe_left = tagged_pids(adapter.probe_tag)
            alive = adapter.alive
            events = await _ask_and_answer(adapter, None)
            return adapter, took, probe_left, alive, events
        finally:
            await adapter.close()

    adapter, took, probe_left, alive, events = run_async(main())
    assert calls(log) == ["app-server", "features"]
    assert adapter.user_input.by == codex_features.PROBE_FAILED
    assert "no answer" in adapter.user_input.detail
    # timeout 1.5 s, TERM ignored: at most 1 s grace, then SIGKILL reaped within 1 s
    assert took < 1.5 + codex_features.TERM_GRACE + codex_features.KILL_DEADLINE + 2
    assert probe_left == [] and alive
    # the agent runs its turn with Codex's native behaviour: no question is put to amux
    assert not [e for e in events if isinstance(e, QuestionAsked)]
    assert [t.type for t in terminals(events)] == ["turn.completed"]
    assert "unavailable" in str(model_server.tool_requests()[-1].body["input"][-1])
    assert [e.text for e in events if isinstance(e, MessageCompleted)][-1] == \
        "went on without asking"
    assert_no_leak([adapter.tag, adapter.probe_tag])


def test_a_failed_initialize_cancels_and_reaps_the_probe(tmp_path, model_server):
    runtimes, log = wrapped_runtimes(tmp_path)
    cfg = make_config("codex", tmp_path, model_server.base_url,
                      **wrapped(runtimes_dir=runtimes),
                      extra_env={"WRAP_HANG_FEATURES": "1", "WRAP_FAIL_APP_SERVER": "1"})

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            with pytest.raises(errors.RuntimeAdapterError):
                await adapter.start()
            return adapter
        finally:
            await adapter.close()

    began = time.monotonic()
    adapter = run_async(main())
    took = time.monotonic() - began
    assert calls(log) == ["app-server", "features"]  # the probe was running
    assert adapter.probe_pid is not None and adapter.user_input is None
    # the handshake failed after ~1 s; the hanging probe was stopped with it, not at its
    # own 10 s timeout
    assert took < 1 + codex_features.TERM_GRACE + codex_features.KILL_DEADLINE + 3
    assert_no_leak([adapter.tag, adapter.probe_tag])


def test_probe_results_are_not_shared_between_sessions(tmp_path, model_server):
    runtimes, log = wrapped_runtimes(tmp_path)
    wires: dict[str, list] = {"a": [], "b": []}

    def config(name: str, **extra):
        base = tmp_path / name
        return make_config("codex", base, model_server.base_url, **wrapped(runtimes_dir=runtimes),
                           wire_observer=lambda d, m: wires[name].append((d, m)), **extra)

    async def one(cfg):
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()
            return adapter
        finally:
            await adapter.close()

    async def main():
        first = await one(config("a"))
        # the same binary, a second session whose listing lacks the feature
        second = await one(config("b", extra_env={"WRAP_HIDE_FEATURE": "1"}))
        third = await one(config("a"))  # and the first session's identity again
        return first, second, third

    first, second, third = run_async(main())
    assert (first.user_input.by, second.user_input.by, third.user_input.by) == (
        codex_features.BY_PROBE, codex_features.NOT_DECLARED, codex_features.BY_PROBE)
    assert _thread_params(wires["b"])[0].get("config") is None
    probes = [line for line in log.read_text().splitlines() if line.startswith("features")]
    assert len(probes) == 3  # each start probes for itself
    homes = [p.split("CODEX_HOME=")[1].split()[0] for p in probes]
    assert homes[0] != homes[1] and homes[0] == homes[2]
    tags = {p.split("TAG=")[1].split()[0] for p in probes}
    assert len(tags) == 3 and not tags & {first.tag, second.tag, third.tag}
    assert_no_leak([a.tag for a in (first, second, third)] + list(tags))
    assert json.dumps(first.facts())  # facts are plain data for the session row
    assert os.environ.get("WRAP_HIDE_FEATURE") is None
