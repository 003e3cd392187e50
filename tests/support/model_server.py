"""A scripted model server for tests that drive real agent runtimes.

Stdlib only. Listens on 127.0.0.1, port 0, and speaks, streaming (SSE) and plain:

* ``POST /v1/responses``         OpenAI Responses (Codex, codex-acp)
* ``POST /v1/chat/completions``  OpenAI Chat Completions (Pi)
* ``POST /v1/messages``          Anthropic Messages (Claude; ``?beta=true`` is ignored)

Each request that offers tools takes the next scripted reply from a queue: ``ToolCall`` (a
call to whichever shell tool the request offers: ``exec_command``/``shell`` for Codex,
``bash`` for Pi, ``Bash`` for Claude) or ``Text``. When the queue is empty the server answers
``default_text`` — unless a ``responder`` is set, which chooses each reply from the request
itself. A request without tools (a side call such as title generation) gets a short
text and leaves the queue alone. Every request is logged (``server.requests``). A reply may
carry a ``delay`` (seconds before the answer starts) so interrupt tests can act while the
model call is in flight.

    with ModelServer() as server:
        server.script(ToolCall("echo hi > out.txt"), Text("done"))
        ... point the runtime at server.base_url ("http://127.0.0.1:PORT/v1") ...
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from tests.support.loopback_http import QuietHandler

SHELL_TOOL_NAMES = ("exec_command", "shell", "shell_command", "bash", "Bash", "local_shell")


@dataclass
class Text:
    text: str
    delay: float = 0.0
    usage: dict[str, int] | None = None
    stall: float = 0.0  # seconds the stream pauses after its first text delta (streaming)


@dataclass
class ToolCall:
    command: str
    delay: float = 0.0
    usage: dict[str, int] | None = None
    tool: str | None = None  # force a tool name; default: the shell tool the request offers
    extra: dict[str, Any] | None = None  # more arguments (e.g. Codex sandbox escalation)
    arguments: dict[str, Any] | None = None  # the exact arguments (for a non-shell tool)
    # Responses only: the namespace of a namespaced tool (Codex offers each MCP server's
    # tools as a ``namespace`` tool, e.g. ``mcp__amux``; the call names both)
    namespace: str | None = None


@dataclass
class Fail:
    """An HTTP error answer (not retried by the runtimes when 400)."""

    message: str
    status: int = 400
    delay: float = 0.0


@dataclass
class LoggedRequest:
    path: str
    body: dict[str, Any]
    at: float
    reply: Any = None
    disconnected: bool = False
    headers: dict[str, str] | None = None  # as sent (lower-case names)

    @property
    def tool_names(self) -> list[str]:
        return _tool_names(self.body)

    @property
    def has_tools(self) -> bool:
        return bool(self.tool_names)


def _offered_tools(body: dict[str, Any]) -> list[Any]:
    """The request's tools: ``tools``, and for Codex models whose catalog entry sends them
    as conversation input, the ``additional_tools`` items of ``input``."""
    tools = list(body.get("tools") or [])
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += list(item.get("tools") or [])
    return tools


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in _offered_tools(body):
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":  # Codex: one MCP server's tools, nested
            names += [f"{tool.get('name')}.{t.get('name')}" for t in tool.get("tools") or []
                      if isinstance(t, dict)]
            continue
        if isinstance(tool.get("function"), dict):
            names.append(tool["function"].get("name", ""))
        elif tool.get("name"):
            names.append(tool["name"])
        elif tool.get("type"):
            names.append(tool["type"])
    return names


def _tool_schema(body: dict[str, Any], name: str) -> dict[str, Any]:
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if fn.get("name") == name:
            return fn.get("parameters") or fn.get("input_schema") or {}
    return {}


def shell_arguments(body: dict[str, Any], name: str, command: str,
                    extra: dict[str, Any] | None = None,
                    exact: dict[str, Any] | None = None) -> dict[str, Any]:
    """Arguments for a call of the shell tool ``name`` running ``command``."""
    if exact is not None:
        return exact
    props = (_tool_schema(body, name).get("properties") or {})
    if "cmd" in props:
        args: dict[str, Any] = {"cmd": command}
    elif "command" in props and props["command"].get("type") == "array":
        args = {"command": ["bash", "-lc", command]}
    else:
        args = {"command": command}
    return {**args, **{k: v for k, v in (extra or {}).items() if not props or k in props}}


DEFAULT_USAGE = {"input_tokens": 100, "output_tokens": 10, "cached_input_tokens": 0,
                 "reasoning_tokens": 0}


class ModelServer:
    def __init__(self, default_text: str = "Done.", side_text: str = "Scripted title",
                 api_key: str | None = None):
        self.default_text = default_text
        # set: `GET …/models` answers 401 unless the request carries this key (as a real
        # provider does), so a connection test can tell reachable from authenticated
        self.api_key = api_key
        # what `GET …/models` lists: ids, or whole entries ({"id", ...advertised fields});
        # `models_body`, when set, is answered instead (a route that lists no models)
        self.models: list[str | dict[str, Any]] = []
        self.models_body: Any = None
        self.model_list_requests = 0  # `GET …/models` asked, answered or not
        # set: `GET …/models` answers as Anthropic's GET /v1/models does — 401 unless the
        # request carries `x-api-key` (the right one, when `api_key` is set; a Bearer
        # header is not accepted), 400 without `anthropic-version`; `limit` 1 to 1000 (default 20,
        # else 400), `after_id` (an id not listed: 400), and the paged answer
        # {"data", "has_more", "first_id", "last_id"}. `page_max` shortens every page
        # further (so a test pages without a thousand models); `pages_loop` makes a broken
        # route that ignores `after_id` (always the first page, always "has_more").
        self.anthropic = False
        self.page_max = 1000
        self.pages_loop = False
        self.model_list_queries: list[dict[str, str]] = []  # each `GET …/models` query
        self.side_text = side_text
        self.requests: list[LoggedRequest] = []
        self._queue: list[Text | ToolCall] = []
        # Replaces the queue when set: the reply is a function of the request itself, so
        # concurrent sessions, and a turn replayed after a crash, each get their own script.
        self.responder: Callable[[dict[str, Any]], Text | ToolCall] | None = None
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ----------------------------------------------------------------------
    def script(self, *replies: Text | ToolCall) -> None:
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def tool_requests(self) -> list[LoggedRequest]:
        with self._lock:
            return [r for r in self.requests if r.has_tools]

    def wait_for_requests(self, count: int, timeout: float = 30.0, tools_only: bool = True
                          ) -> list[LoggedRequest]:
        """Block until ``count`` requests (with tools, by default) have arrived."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [r for r in self.requests if r.has_tools or not tools_only]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"expected {count} model requests, got {len(got)}")
                self._cond.wait(left)

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ModelServer:
        server = self

        class Handler(_Handler):
            model_server = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- used by the handler ------------------------------------------------------------
    def _next_reply(self, logged: LoggedRequest) -> Text | ToolCall:
        with self._cond:
            self.requests.append(logged)
            if not logged.has_tools:
                reply: Text | ToolCall = Text(self.side_text)
            elif self.responder is not None:
                reply = self.responder(logged.body)
            elif self._queue:
                reply = self._queue.pop(0)
            else:
                reply = Text(self.default_text)
            logged.reply = reply
            self._cond.notify_all()
            return reply

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops; True if the full delay elapsed."""
        return not self._stopping.wait(seconds) if seconds > 0 else True

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"


class _Handler(QuietHandler):
    model_server: ModelServer

    # --- plumbing ---
    def _json(self, status: int, obj: Any) -> None:
        self.reply(status, json.dumps(obj), [("Content-Type", "application/json")])

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, event: str | None, data: Any) -> None:
        chunk = ""
        if event:
            chunk += f"event: {event}\n"
        chunk += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        self.wfile.write(chunk.encode())
        self.wfile.flush()

    def _stall(self, reply: Any, index: int) -> None:
        """A Text's `stall`: after the first delta went out, before the second."""
        if index == 1 and getattr(reply, "stall", 0):
            self.model_server._sleep(reply.stall)

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        if self.model_server.anthropic and path.rstrip("/").endswith("/models"):
            if path.rstrip("/") != "/v1/models":  # Anthropic lists its models there only
                self._anthropic_error(404, "not_found_error", "Not found")
                return
            self.model_server.model_list_requests += 1
            self._anthropic_models()
        elif path.rstrip("/").endswith("/models"):
            self.model_server.model_list_requests += 1
            key = self.model_server.api_key
            sent = {self.headers.get("Authorization", ""), self.headers.get("x-api-key", "")}
            if key is not None and not sent & {f"Bearer {key}", key}:
                self._json(401, {"error": {"message": "Incorrect API key provided",
                                           "type": "invalid_request_error"}})
                return
            if self.model_server.models_body is not None:
                self._json(200, self.model_server.models_body)
                return
            data = [m if isinstance(m, dict) else {"id": m, "object": "model",
                                                   "owned_by": "scripted"}
                    for m in self.model_server.models]
            # "models" stays empty: Codex reads it as its own remote model catalog
            self._json(200, {"object": "list", "data": data, "models": []})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def _anthropic_error(self, status: int, kind: str, message: str) -> None:
        self._json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _anthropic_models(self) -> None:
        """GET /v1/models as Anthropic answers it: authenticated, paged."""
        from urllib.parse import parse_qs

        srv = self.model_server
        query = {k: v[-1] for k, v in parse_qs(self.path.partition("?")[2]).items()}
        srv.model_list_queries.append(query)
        sent = self.headers.get("x-api-key")
        if not sent or (srv.api_key is not None and sent != srv.api_key):
            self._anthropic_error(401, "authentication_error", "invalid x-api-key")
            return
        if not self.headers.get("anthropic-version"):  # Anthropic: a bad request, not auth
            self._anthropic_error(400, "invalid_request_error",
                                  "anthropic-version: header is required")
            return
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            self._anthropic_error(400, "invalid_request_error",
                                  "limit: must be between 1 and 1000")
            return
        entries = [m if isinstance(m, dict) else {
            "id": m, "type": "model", "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
            for m in srv.models]
        ids = [e.get("id") for e in entries]
        start = 0
        if "after_id" in query and not srv.pages_loop:
            if query["after_id"] not in ids:
                self._anthropic_error(400, "invalid_request_error", "after_id: not found")
                return
            start = ids.index(query["after_id"]) + 1
        page = entries[start:start + min(limit, srv.page_max)]
        self._json(200, {"data": page,
                         "has_more": srv.pages_loop or start + len(page) < len(entries),
                         "first_id": page[0].get("id") if page else None,
                         "last_id": page[-1].get("id") if page else None})

    def do_POST(self) -> None:  # noqa: N802
        srv = self.model_server
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "bad json"}})
            return
        if path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": 100})
            return
        if not (path.endswith("/responses") or path.endswith("/chat/completions")
                or path.endswith("/messages")):
            self._json(404, {"error": {"message": f"unknown path {path}"}})
            return
        logged = LoggedRequest(path=path, body=body, at=time.time(),
                               headers={k.lower(): v for k, v in self.headers.items()})
        reply = srv._next_reply(logged)
        if not srv._sleep(reply.delay):
            return
        if isinstance(reply, Fail):
            self._json(reply.status, {"type": "error", "error": {
                "type": "invalid_request_error", "message": reply.message}})
            return
        try:
            if path.endswith("/responses"):
                self._responses(body, reply)
            elif path.endswith("/chat/completions"):
                self._chat(body, reply)
            else:
                self._anthropic(body, reply)
        except (BrokenPipeError, ConnectionResetError):
            logged.disconnected = True

    def _tool_for(self, body: dict[str, Any], reply: ToolCall) -> str:
        if reply.tool:
            return reply.tool
        names = _tool_names(body)
        for candidate in SHELL_TOOL_NAMES:
            if candidate in names:
                return candidate
        return names[0] if names else "shell"

    # --- OpenAI Responses ---
    def _responses(self, body: dict[str, Any], reply: Text | ToolCall) -> None:
        srv = self.model_server
        rid = srv._new_id("resp")
        usage = {**DEFAULT_USAGE, **(reply.usage or {})}
        usage_obj = {
            "input_tokens": usage["input_tokens"],
            "input_tokens_details": {"cached_tokens": usage["cached_input_tokens"]},
            "output_tokens": usage["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": usage["reasoning_tokens"]},
            "total_tokens": usage["input_tokens"] + usage["output_tokens"],
        }
        base = {"id": rid, "object": "response", "created_at": int(time.time()),
                "model": body.get("model", "scripted"), "status": "in_progress", "output": []}
        if isinstance(reply, ToolCall):
            name = self._tool_for(body, reply)
            args = json.dumps(shell_arguments(body, name, reply.command, reply.extra,
                                                  reply.arguments))
            item = {"type": "function_call", "id": srv._new_id("fc"),
                    "call_id": srv._new_id("call"), "name": name, "arguments": args,
                    "status": "completed"}
            if reply.namespace:
                item["namespace"] = reply.namespace
        else:
            item = {"type": "message", "id": srv._new_id("msg"), "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
        done = {**base, "status": "completed", "output": [item], "usage": usage_obj}
        if not body.get("stream"):
            self._json(200, done)
            return
        self._sse_start()
        seq = itertools.count()
        self._sse("response.created", {"type": "response.created", "sequence_number": next(seq),
                                       "response": base})
        self._sse("response.in_progress", {"type": "response.in_progress",
                                           "sequence_number": next(seq), "response": base})
        if isinstance(reply, ToolCall):
            self._sse("response.output_item.added", {
                "type": "response.output_item.added", "sequence_number": next(seq),
                "output_index": 0, "item": {**item, "arguments": "", "status": "in_progress"}})
            self._sse("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": 0, "delta": item["arguments"]})
            self._sse("response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": 0, "arguments": item["arguments"]})
        else:
            self._sse("response.output_item.added", {
                "type": "response.output_item.added", "sequence_number": next(seq),
                "output_index": 0, "item": {**item, "content": [], "status": "in_progress"}})
            part = {"type": "output_text", "text": "", "annotations": []}
            self._sse("response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": 0, "content_index": 0, "part": part})
            for i, piece in enumerate(_pieces(reply.text)):
                self._stall(reply, i)
                self._sse("response.output_text.delta", {
                    "type": "response.output_text.delta", "sequence_number": next(seq),
                    "item_id": item["id"], "output_index": 0, "content_index": 0,
                    "delta": piece})
            self._sse("response.output_text.done", {
                "type": "response.output_text.done", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": 0, "content_index": 0,
                "text": reply.text})
            self._sse("response.content_part.done", {
                "type": "response.content_part.done", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": 0, "content_index": 0,
                "part": {**part, "text": reply.text}})
        self._sse("response.output_item.done", {"type": "response.output_item.done",
                                                "sequence_number": next(seq),
                                                "output_index": 0, "item": item})
        self._sse("response.completed", {"type": "response.completed",
                                         "sequence_number": next(seq), "response": done})

    # --- OpenAI Chat Completions ---
    def _chat(self, body: dict[str, Any], reply: Text | ToolCall) -> None:
        srv = self.model_server
        cid = srv._new_id("chatcmpl")
        usage = {**DEFAULT_USAGE, **(reply.usage or {})}
        usage_obj = {"prompt_tokens": usage["input_tokens"],
                     "completion_tokens": usage["output_tokens"],
                     "total_tokens": usage["input_tokens"] + usage["output_tokens"],
                     "prompt_tokens_details": {"cached_tokens": usage["cached_input_tokens"]}}
        model = body.get("model", "scripted")
        created = int(time.time())
        if isinstance(reply, ToolCall):
            name = self._tool_for(body, reply)
            call = {"id": srv._new_id("call"), "type": "function",
                    "function": {"name": name,
                                 "arguments": json.dumps(shell_arguments(body, name,
                                                                         reply.command,
                                                                         reply.extra,
                                                                         reply.arguments))}}
            message: dict[str, Any] = {"role": "assistant", "content": None,
                                       "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": reply.text}
            finish = "stop"
        if not body.get("stream"):
            self._json(200, {"id": cid, "object": "chat.completion", "created": created,
                             "model": model, "usage": usage_obj,
                             "choices": [{"index": 0, "message": message,
                                          "finish_reason": finish}]})
            return
        self._sse_start()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {"id": cid, "object": "chat.completion.chunk", "created": created,
                    "model": model, "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": finish_reason}]}

        self._sse(None, chunk({"role": "assistant", "content": ""}))
        if isinstance(reply, ToolCall):
            self._sse(None, chunk({"tool_calls": [{"index": 0, **call}]}))
        else:
            for i, piece in enumerate(_pieces(reply.text)):
                self._stall(reply, i)
                self._sse(None, chunk({"content": piece}))
        self._sse(None, chunk({}, finish))
        self._sse(None, {"id": cid, "object": "chat.completion.chunk", "created": created,
                         "model": model, "choices": [], "usage": usage_obj})
        self._sse(None, "[DONE]")

    # --- Anthropic Messages ---
    def _anthropic(self, body: dict[str, Any], reply: Text | ToolCall) -> None:
        srv = self.model_server
        mid = srv._new_id("msg")
        usage = {**DEFAULT_USAGE, **(reply.usage or {})}
        model = body.get("model", "scripted")
        if isinstance(reply, ToolCall):
            name = self._tool_for(body, reply)
            block: dict[str, Any] = {"type": "tool_use", "id": srv._new_id("toolu"),
                                     "name": name,
                                     "input": shell_arguments(body, name, reply.command,
                                                              reply.extra, reply.arguments)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": reply.text}
            stop = "end_turn"
        usage_obj = {"input_tokens": usage["input_tokens"],
                     "output_tokens": usage["output_tokens"],
                     "cache_read_input_tokens": usage["cached_input_tokens"],
                     "cache_creation_input_tokens": 0}
        if not body.get("stream"):
            self._json(200, {"id": mid, "type": "message", "role": "assistant",
                             "model": model, "content": [block], "stop_reason": stop,
                             "stop_sequence": None, "usage": usage_obj})
            return
        self._sse_start()
        self._sse("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {**usage_obj, "output_tokens": 1}}})
        if block["type"] == "tool_use":
            self._sse("content_block_start", {"type": "content_block_start", "index": 0,
                                              "content_block": {**block, "input": {}}})
            self._sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json":
                                                            json.dumps(block["input"])}})
        else:
            self._sse("content_block_start", {"type": "content_block_start", "index": 0,
                                              "content_block": {"type": "text", "text": ""}})
            for i, piece in enumerate(_pieces(block["text"])):
                self._stall(reply, i)
                self._sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                  "delta": {"type": "text_delta",
                                                            "text": piece}})
        self._sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        self._sse("message_delta", {"type": "message_delta",
                                    "delta": {"stop_reason": stop, "stop_sequence": None},
                                    "usage": {"output_tokens": usage["output_tokens"]}})
        self._sse("message_stop", {"type": "message_stop"})


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
