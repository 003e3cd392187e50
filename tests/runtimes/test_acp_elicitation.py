"""ACP form elicitation through the real ACP client handling (the agent-client-protocol SDK
inside the ACP adapter) against a scripted ACP agent process: one question per schema
property, answered together as ``accept`` content; cancelling one declines the form; an
interrupt releases it as ``cancel``; late, duplicate and invalid answers are refused."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
from pathlib import Path

import pytest

from runtimes import errors
from runtimes.acp import codex_acp_binary
from runtimes.events import MessageCompleted, QuestionAsked
from tests.support import isolation
from tests.support.runtimes import (
    adapter_for,
    assert_no_leak,
    collect,
    make_config,
    run_async,
    terminals,
)

pytestmark = pytest.mark.timeout(120)
AGENT = Path(__file__).resolve().parents[1] / "support" / "acp_elicit_agent.py"
SECRET = "hunter2-do-not-echo"
SCHEMA = {"type": "object", "required": ["color", "pin"], "properties": {
    "color": {"type": "string", "title": "Color", "description": "Which color?",
              "oneOf": [{"const": "r", "title": "red", "description": "warm"},
                        {"const": "b", "title": "blue", "description": "cool"}]},
    "sizes": {"type": "array", "title": "Sizes", "items": {"type": "string",
                                                           "enum": ["S", "M", "L"]}},
    "confirm": {"type": "boolean", "title": "Go ahead?"},
    "count": {"type": "integer", "title": "How many?"},
    "pin": {"type": "string", "title": "PIN", "format": "password"}}}


def scripted_agent(base: Path, schema: dict = SCHEMA) -> tuple[Path, Path, dict[str, str]]:
    """A runtimes directory whose ACP agent is the scripted one: (dir, frame log, env); the
    log is the agent's ``frames.log`` in its work directory (``base``/work for a runtime
    test's config)."""
    runtimes = base / "runtimes"
    launcher = codex_acp_binary(runtimes)
    launcher.parent.mkdir(parents=True)
    agent = runtimes / "acp_elicit_agent.py"
    shutil.copy(AGENT, agent)
    agent.chmod(0o644)
    python = shutil.which("python3", path="/usr/bin:/bin")
    launcher.write_text(f"#!/bin/sh\nexec {python} {agent} \"$@\"\n")
    launcher.chmod(0o755)
    for path in [runtimes, *launcher.parents]:
        if path == runtimes.parent:
            break
        path.chmod(path.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
    isolation.reachable(launcher.parent)
    # in the work directory: what the agent writes there is seen by amux under every
    # backend (bwrap shows the agent a /tmp of its own)
    log = base / "work" / "frames.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    log.chmod(0o666)
    # relative: the agent writes it in its own work directory, wherever that is
    env = {"ELICIT_SCHEMA": json.dumps(schema), "ELICIT_LOG": log.name,
           "ELICIT_MESSAGE": "Before I paint", "ELICIT_SECRET_KEY": "pin",
           "ELICIT_SECRET_SHA256": hashlib.sha256(SECRET.encode()).hexdigest()}
    return runtimes, log, env


def answers_sent(log: Path) -> list[dict]:
    frames = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [f for f in frames if "method" not in f and str(f.get("id", "")).startswith(
        "elicit-")]


def _config(tmp_path, model_server, schema=SCHEMA):
    runtimes, log, env = scripted_agent(tmp_path, schema)
    return make_config("acp", tmp_path, model_server.base_url, runtimes_dir=runtimes,
                       extra_env=env), log


def test_a_form_is_asked_per_field_and_answered_together(tmp_path, model_server):
    cfg, log = _config(tmp_path, model_server)

    async def main():
        adapter = adapter_for("acp", cfg)
        asked: list[QuestionAsked] = []
        refused: list[str] = []
        try:
            await adapter.start()

            async def on(ev):
                if not isinstance(ev, QuestionAsked):
                    return
                asked.append(ev)
                if len(asked) < 5:
                    return
                ids = [a.request_id for a in asked]
                with pytest.raises(errors.RuntimeAdapterError) as bad:
                    await adapter.answer_question(ids[3], {"q3": "many"})
                refused.append(bad.value.code)
                with pytest.raises(errors.RuntimeAdapterError) as bad:
                    await adapter.answer_question(ids[0], {"q0": "green"})
                refused.append(bad.value.code)
                await adapter.answer_question(ids[0], {"q0": "blue"})
                with pytest.raises(errors.UnknownRequest):  # a duplicate
                    await adapter.answer_question(ids[0], {"q0": "red"})
                await adapter.answer_question(ids[1], {"q1": ["S", "L"]})
                await adapter.answer_question(ids[2], {"q2": "Yes"})
                await adapter.answer_question(ids[3], {"q3": "3"})
                assert answers_sent(log) == []  # nothing goes back before the last field
                await adapter.answer_question(ids[4], {"q4": SECRET})

            events = await collect(adapter, "paint it", on_event=on)
            return adapter, asked, refused, events
        finally:
            await adapter.close()

    adapter, asked, refused, events = run_async(main())
    assert refused == ["invalid_answer", "invalid_answer"]
    questions = [a.questions[0] for a in asked]
    assert [q.header for q in questions] == ["Color", "Sizes", "Go ahead?", "How many?", "PIN"]
    color, sizes, confirm, count, pin = questions
    assert color.text == "Before I paint\n\nWhich color?"
    assert (color.options, color.allow_custom) == (("red", "blue"), False)
    assert color.descriptions == {"red": "warm", "blue": "cool"}
    assert (sizes.options, sizes.multi_select) == (("S", "M", "L"), True)
    assert confirm.options == ("Yes", "No") and not confirm.allow_custom
    assert count.options == () and count.allow_custom and not count.sensitive
    assert pin.sensitive and pin.allow_custom and not color.sensitive
    assert all(a.blocking and a.delivery is None for a in asked)
    [sent] = answers_sent(log)
    assert sent["result"]["action"] == "accept"
    content = sent["result"]["content"]
    assert {k: v for k, v in content.items() if k != "pin"} == {
        "color": "b", "sizes": ["S", "L"], "confirm": True, "count": 3}
    assert content["pin"] == SECRET  # the secret reached the agent, and only the agent
    said = [e.text for e in events if isinstance(e, MessageCompleted)]
    assert said == ['form accept {"color": "b", "confirm": true, "count": 3, '
                    '"pin": "matched", "sizes": ["S", "L"]}']
    assert SECRET not in json.dumps([e.payload() for e in events], default=str)
    assert [t.type for t in terminals(events)] == ["turn.completed"]
    assert_no_leak([adapter.tag])


def test_cancelling_one_field_declines_the_form(tmp_path, model_server):
    cfg, log = _config(tmp_path, model_server)

    async def main():
        adapter = adapter_for("acp", cfg)
        asked: list[QuestionAsked] = []
        try:
            await adapter.start()

            async def on(ev):
                if isinstance(ev, QuestionAsked):
                    asked.append(ev)
                    if len(asked) == 5:
                        await adapter.answer_question(asked[0].request_id, {"q0": "red"})
                        await adapter.answer_question(asked[2].request_id, None)
                        assert adapter.pending_requests == []  # the others went with it
                        with pytest.raises(errors.UnknownRequest):
                            await adapter.answer_question(asked[4].request_id, {"q4": "x"})

            return adapter, await collect(adapter, "paint it", on_event=on)
        finally:
            await adapter.close()

    adapter, events = run_async(main())
    [sent] = answers_sent(log)
    assert sent["result"] == {"action": "decline"}
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["form decline"]
    assert [t.type for t in terminals(events)] == ["turn.completed"]
    assert_no_leak([adapter.tag])


def test_an_interrupt_releases_the_form_as_cancelled(tmp_path, model_server):
    cfg, log = _config(tmp_path, model_server, {"type": "object", "properties": {
        "name": {"type": "string", "title": "Name"}}})

    async def main():
        adapter = adapter_for("acp", cfg)
        try:
            await adapter.start()

            async def on(ev):
                if isinstance(ev, QuestionAsked):
                    await adapter.interrupt()

            events = await collect(adapter, "who?", on_event=on)
            late = None
            asked = next(e for e in events if isinstance(e, QuestionAsked))
            try:
                await adapter.answer_question(asked.request_id, {"q0": "Ann"})
            except errors.UnknownRequest as exc:
                late = exc
            return adapter, events, late
        finally:
            await adapter.close()

    adapter, events, late = run_async(main())
    assert late is not None  # a late answer is refused
    [sent] = answers_sent(log)
    assert sent["result"] == {"action": "cancel"}
    question = next(e for e in events if isinstance(e, QuestionAsked)).questions[0]
    assert question.text == "Before I paint\n\nName"
    assert [t.type for t in terminals(events)] == ["turn.cancelled"]
    assert_no_leak([adapter.tag])
