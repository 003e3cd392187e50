"""Seed 000: an ACP agent receives image blocks only when its ``initialize`` answer says
``agentCapabilities.promptCapabilities.image`` is exactly true; otherwise the text alone
goes, and the turn says so."""

from __future__ import annotations

import json

import pytest
from acp.schema import InitializeResponse

from runtimes import TurnInput
from runtimes.acp import accepts_images
from tests.integration.sessions.test_controls_api import image_b64
from tests.runtimes.conftest import require_runtime
from tests.support.runtimes import adapter_for, assert_no_leak, make_config, run_async

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("caps, expected", [
    ({"promptCapabilities": {"image": True}}, True),
    ({"promptCapabilities": {"image": False}}, False),
    ({"promptCapabilities": {}}, False),
    ({}, False),
])
def test_only_an_explicit_true_declares_image_input(caps, expected):
    init = InitializeResponse.model_validate({"protocolVersion": 1, "agentCapabilities": caps})
    assert accepts_images(init) is expected


def _turn(adapter, parts):
    async def run():
        return [ev async for ev in adapter.run_turn(TurnInput("", parts=parts))]
    return run()


def test_the_image_goes_only_to_an_agent_that_declared_it(tmp_path, model_server):
    require_runtime("acp")
    png, other = image_b64("PNG", (3, 3)), image_b64("PNG", (6, 2))
    parts = [("text", "describe"), ("image", "image/png", png)]

    async def main():
        adapter = adapter_for("acp", make_config("acp", tmp_path, model_server.base_url))
        try:
            await adapter.start()
            declared = adapter.image_input  # what codex-acp 0.16.0 says in initialize
            with_image = await _turn(adapter, parts)
            sent_with = json.dumps(model_server.tool_requests()[-1].body)
            # the same agent as one that had not declared image input
            adapter.image_input = False
            without = await _turn(adapter, [("text", "describe again"),
                                            ("image", "image/png", other)])
            sent_without = json.dumps(model_server.tool_requests()[-1].body)
            return adapter, declared, with_image, sent_with, without, sent_without
        finally:
            await adapter.close()

    adapter, declared, with_image, sent_with, without, sent_without = run_async(main())
    assert declared is True
    assert png in sent_with and with_image[-1].type == "turn.completed"
    assert other not in sent_without and "describe again" in sent_without
    assert [(e.code) for e in without if e.type == "error"] == ["images_unsupported"]
    assert without[-1].type == "turn.completed"
    assert_no_leak([adapter.tag])
