"""The scripted model server speaks the three wire formats."""

import json
import urllib.request

from tests.support.model_server import ModelServer, Text, ToolCall


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode()


def test_responses_tool_call_then_text_and_side_calls_leave_the_queue():
    with ModelServer() as server:
        server.script(ToolCall("ls"), Text("bye"))
        side = _post(server.base_url + "/responses", {"input": "title?"})
        assert "Scripted title" in side and server.pending == 2
        tools = [{"type": "function", "name": "exec_command",
                  "parameters": {"properties": {"cmd": {"type": "string"}}}}]
        stream = _post(server.base_url + "/responses", {"stream": True, "tools": tools})
        assert "response.completed" in stream and '\\"cmd\\": \\"ls\\"' in stream
        assert "bye" in _post(server.base_url + "/responses", {"tools": tools})
        assert len(server.requests) == 3 and len(server.tool_requests()) == 2


def test_chat_and_anthropic_streams():
    with ModelServer() as server:
        server.script(ToolCall("pwd"), Text("hello"))
        tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
        chat = _post(server.base_url + "/chat/completions", {"stream": True, "tools": tools})
        assert '"tool_calls"' in chat and chat.strip().endswith("[DONE]")
        msgs = _post(server.root_url + "/v1/messages?beta=true",
                     {"stream": True, "tools": [{"name": "Bash", "input_schema": {}}]})
        assert "message_stop" in msgs and "hello" in msgs
