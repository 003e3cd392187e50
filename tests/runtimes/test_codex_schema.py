"""Every message amux exchanges with Codex validates against the JSON schema that the pinned
binary generates (`codex app-server generate-json-schema --experimental`: amux opts into the
experimental API at initialize, for the per-turn collaboration mode that carries the turn's
system prompt)."""

from __future__ import annotations

import json
import subprocess

import pytest
from jsonschema import Draft7Validator

from runtimes import TurnInput
from runtimes.base import default_runtimes_dir
from runtimes.codex import codex_binary
from tests.integration.sessions.test_controls_api import image_b64
from tests.runtimes.conftest import require_runtime
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import adapter_for, make_config, run_async

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def schema_dir(tmp_path_factory):
    require_runtime("codex")
    out = tmp_path_factory.mktemp("codex-schema")
    home = tmp_path_factory.mktemp("codex-home")
    subprocess.run([str(codex_binary(default_runtimes_dir())), "app-server",
                    "generate-json-schema", "--experimental", "--out", str(out)],
                   check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home)})
    return out


def _validator(schema_dir, name):
    return Draft7Validator(json.loads((schema_dir / f"{name}.json").read_text()))


def test_wire_messages_match_the_pinned_schema(tmp_path, model_server, schema_dir):
    wire: list[tuple[str, dict]] = []
    cfg = make_config("codex", tmp_path, model_server.base_url,
                      wire_observer=lambda d, m: wire.append((d, m)))
    model_server.script(ToolCall("echo hi > hi.txt"), Text("done"))

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()
            async for _event in adapter.run_turn(TurnInput("say hi",
                                                           system_prompt="Sign as the heron.")):
                pass
            # the runtime controls' messages too: a switched model with an image input,
            # a native compaction, a new thread
            await adapter.set_model("gpt-5.4", "low")
            parts = [("text", "look"), ("image", "image/png", image_b64())]
            async for _event in adapter.run_turn(TurnInput("look", parts=parts)):
                pass
            async for _event in adapter.run_turn(TurnInput("", command="compact")):
                pass
            await adapter.clear()
        finally:
            await adapter.close()

    run_async(main())
    client_request = _validator(schema_dir, "ClientRequest")
    client_notification = _validator(schema_dir, "ClientNotification")
    server_notification = _validator(schema_dir, "ServerNotification")
    outgoing = [m for d, m in wire if d == "out"]
    incoming_notes = [m for d, m in wire if d == "in" and "method" in m and "id" not in m]
    assert {m.get("method") for m in outgoing} >= {"initialize", "initialized", "thread/start",
                                                   "turn/start", "thread/compact/start"}
    switched = [m for m in outgoing if m.get("method") == "turn/start"][1]["params"]
    assert (switched["model"], switched["effort"]) == ("gpt-5.4", "low")
    assert [i["type"] for i in switched["input"]] == ["text", "image"]
    assert [m["method"] for m in outgoing if m.get("method") == "thread/start"] == [
        "thread/start"] * 2
    turn_start = next(m for m in outgoing if m.get("method") == "turn/start")
    settings = turn_start["params"]["collaborationMode"]["settings"]
    assert settings["developer_instructions"] == "Sign as the heron."
    for msg in outgoing:
        if "id" in msg:
            errors = list(client_request.iter_errors(msg))
        else:
            errors = list(client_notification.iter_errors(msg))
        assert not errors, f"{msg.get('method')}: {errors[0].message}"
    methods = set()
    for msg in incoming_notes:
        errors = list(server_notification.iter_errors(msg))
        assert not errors, f"{msg['method']}: {errors[0].message[:300]}"
        methods.add(msg["method"])
    assert {"turn/started", "item/started", "item/completed", "thread/tokenUsage/updated",
            "turn/completed"} <= methods
