"""Every MCP server (the worker's, the caller's and the main session's tools) holds its
arguments to the API's rule: every tool refuses arguments it does not declare and lacks
ones it requires, naming each of them at once, before the tool runs (so nothing is done and
no token is read)."""

from __future__ import annotations

import asyncio

import pytest
from mcp.server.mcpserver.exceptions import ToolError


def _servers():
    from execution.mcp_tools import build_server as caller
    from tickets.tools.main_server import build_server as main
    from tickets.tools.mcp_server import build_server as worker

    return {"worker": worker(), "caller": caller(), "main": main()}


def _tools():
    for label, server in _servers().items():
        for tool in server._tool_manager.list_tools():  # noqa: SLF001 - the SDK's registry
            yield pytest.param(label, tool.name, id=f"{label}:{tool.name}")


@pytest.mark.parametrize(("label", "name"), list(_tools()))
def test_every_tool_names_unknown_and_missing_arguments_at_once(label, name):
    server = _servers()[label]
    tool = server._tool_manager.get_tool(name)  # noqa: SLF001
    assert tool.parameters["additionalProperties"] is False
    required = tool.parameters.get("required", [])
    with pytest.raises(ToolError) as refused:
        asyncio.run(server.call_tool(name, {"zz_unknown": 1, "zz_other": "x"}))
    said = str(refused.value)
    assert "zz_unknown\n  unknown field" in said and "zz_other\n  unknown field" in said, said
    for argument in required:
        assert f"{argument}\n  required" in said, said
    assert "errors.pydantic.dev" not in said and "input_value" not in said


def test_a_wrong_type_is_named_with_the_unknown_argument():
    server = _servers()["worker"]
    with pytest.raises(ToolError) as refused:
        asyncio.run(server.call_tool("hand_back", {"trigger": "seven", "reasn": "typo"}))
    said = str(refused.value)
    assert said.startswith("Error executing tool hand_back: 3 validation errors")
    assert "trigger\n  Input should be a valid integer" in said
    assert "reason\n  required" in said and "reasn\n  unknown field" in said
