"""The model gateway's rules (pure: no Django, no I/O): which paths it serves, the error
bodies each API's clients understand, which headers cross it, and the usage a provider's
answer reports (read incrementally from an SSE stream or a JSON body).

Paths are ``/gateway/model/<api>/<rest>``: ``<api>`` is ``openai`` (an ``openai-compat``
provider; the runtime's base URL is the gateway's ``…/openai``, so ``<rest>`` is what the
runtime appends to an OpenAI base URL: ``responses``, ``chat/completions``, ``models``) or
``anthropic`` (an ``anthropic-compat`` provider; Claude Code appends ``v1/messages``). The
upstream URL is the provider's base URL plus the same ``<rest>``.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

PREFIX = "/gateway/model/"
TOKEN_PREFIX = "amxm_"

API_OF_PLATFORM = {"openai-compat": "openai", "anthropic-compat": "anthropic"}

# (api, rest) -> (method, kind). kind "generate" is a model call: caps are checked before
# it and its usage is counted; "list" and "count" are not model calls.
ROUTES: dict[tuple[str, str], tuple[str, str]] = {
    ("openai", "responses"): ("POST", "generate"),
    ("openai", "chat/completions"): ("POST", "generate"),
    ("openai", "models"): ("GET", "list"),
    ("anthropic", "v1/messages"): ("POST", "generate"),
    ("anthropic", "v1/messages/count_tokens"): ("POST", "count"),
    ("anthropic", "v1/models"): ("GET", "list"),
}

# What never crosses the gateway towards the provider: the runtime's credential (amux adds
# the provider's), hop-by-hop headers, and what httpx sets itself. Accept-Encoding is
# replaced by identity so the bytes passed back are the bytes usage is read from.
DROPPED_REQUEST = frozenset({
    "host", "content-length", "authorization", "x-api-key", "api-key", "cookie",
    "connection", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "accept-encoding", "forwarded", "x-forwarded-for",
    "x-forwarded-host", "x-forwarded-proto", "x-real-ip"})
DROPPED_RESPONSE = frozenset({
    "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
    "set-cookie", "server", "date", "alt-svc"})


@dataclass(frozen=True)
class Route:
    api: str  # "openai" | "anthropic"
    rest: str  # the path after the api, no leading slash
    kind: str  # "generate" | "list" | "count"


class NotFound(ValueError):
    pass


class WrongMethod(ValueError):
    def __init__(self, allowed: str):
        super().__init__(allowed)
        self.allowed = allowed


def route_of(path: str, method: str) -> Route:
    """The route of a request path (NotFound), if the method is the one it takes
    (WrongMethod). A trailing slash is accepted, as on every amux path."""
    if not path.startswith(PREFIX):
        raise NotFound(path)
    api, _, rest = path[len(PREFIX):].partition("/")
    rest = rest.strip("/")
    found = ROUTES.get((api, rest))
    if found is None:
        raise NotFound(path)
    wanted, kind = found
    if method != wanted:
        raise WrongMethod(wanted)
    return Route(api, rest, kind)


def upstream_url(base_url: str, route: Route, query: str) -> str:
    """The provider's URL for a route. An Anthropic base URL is the host root (Claude Code
    appends ``/v1/messages`` to ANTHROPIC_BASE_URL); one that already ends in ``/v1`` is
    not given a second."""
    base = base_url.rstrip("/")
    rest = route.rest
    if route.api == "anthropic" and base.endswith("/v1") and rest.startswith("v1/"):
        rest = rest[3:]
    return f"{base}/{rest}" + (f"?{query}" if query else "")


def credential_of(headers: dict[str, str]) -> str | None:
    """The session credential a runtime sends: ``Authorization: Bearer`` (OpenAI clients,
    Claude with an auth token) or ``x-api-key`` (Anthropic clients)."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None


def looks_like_credential(token: str | None) -> bool:
    return bool(token) and token.startswith(TOKEN_PREFIX) and len(token) < 200


def auth_headers(api: str, key: str) -> dict[str, str]:
    """How amux presents the provider's key: what each runtime sent it with before the
    gateway (Codex and Pi: Bearer; Claude Code: x-api-key)."""
    if api == "anthropic":
        return {"x-api-key": key}
    return {"authorization": f"Bearer {key}"}


def forwarded_headers(headers: dict[str, str]) -> dict[str, str]:
    out = {k: v for k, v in headers.items() if k not in DROPPED_REQUEST}
    out["accept-encoding"] = "identity"
    return out


def answered_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in raw if k.decode("latin-1").lower() not in DROPPED_RESPONSE]


# ------------------------------------------------------------------------ the prompt
# amux's system prompt travels in a marked block (services.turn_prompt marks it), in
# whichever field the runtime puts it (Responses `instructions` or a developer message,
# a Chat Completions system message, Anthropic's `system`, or an ACP agent's inline
# block). The gateway replaces each marked block with the prompt current when the request
# passes, so every model request, each step of a turn, reads the latest version.
PROMPT_START = "<amux-prompt>"
PROMPT_END = "</amux-prompt>"


def mark(text: str) -> str:
    return f"{PROMPT_START}\n{text.strip()}\n{PROMPT_END}\n"


def has_marked(body: bytes) -> bool:
    return PROMPT_START.encode() in body


def replace_marked(body: bytes, text: str | None) -> tuple[bytes, int]:
    """`body` (JSON) with every marked block's text replaced by `text`, and how many were.
    Done on the bytes, not by parsing and re-serialising a conversation that can be
    megabytes long: a block is inside one JSON string, so the new block goes in escaped as
    one (the markers themselves need no escaping)."""
    start, end = PROMPT_START.encode(), PROMPT_END.encode()
    new = json.dumps(f"{PROMPT_START}\n{(text or '').strip()}\n{PROMPT_END}")[1:-1].encode()
    out: list[bytes] = []
    position = count = 0
    while (found := body.find(start, position)) >= 0:
        ending = body.find(end, found)
        if ending < 0:
            break
        out += [body[position:found], new]
        position = ending + len(end)
        count += 1
    if not count:
        return body, 0
    out.append(body[position:])
    return b"".join(out), count


# ------------------------------------------------------------------------ errors
_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                 404: "invalid_request_error", 405: "invalid_request_error",
                 413: "invalid_request_error", 429: "insufficient_quota"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error",
                    405: "invalid_request_error", 413: "request_too_large",
                    429: "rate_limit_error", 529: "overloaded_error"}


def error_body(api: str | None, status: int, message: str, code: str | None = None
               ) -> dict[str, Any]:
    """An error in the API's own shape. A cap answers 429 ``insufficient_quota``: Codex
    reads it as final and does not retry (it shows its own words, "Quota exceeded"; the
    reason is on the ticket, which shows blocked); Pi and Claude show the message."""
    if api == "anthropic":
        return {"type": "error",
                "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"),
                          "message": message}}
    kind = _OPENAI_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None,
                      "code": code or kind}}


# ------------------------------------------------------------------------ usage
@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    seen: bool = False

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def apply_usage(usage: Usage, api: str, event: dict[str, Any]) -> None:
    """Read the usage an event (a stream event or a whole JSON answer) carries.

    OpenAI Responses: ``response.completed`` (or ``.incomplete``/``.failed``) carries the
    final ``response.usage``; a plain answer has ``usage`` at the top. Chat Completions: the
    last chunk (``stream_options.include_usage``) or the answer carries ``usage`` with
    ``prompt_tokens``/``completion_tokens``. Anthropic: ``message_start`` carries the input
    (cache reads and writes are input too), ``message_delta`` the running output count; a
    plain answer carries both."""
    if not isinstance(event, dict):
        return
    if api == "anthropic":
        block = event.get("usage")
        if event.get("type") == "message_start" and isinstance(event.get("message"), dict):
            block = event["message"].get("usage")
        if not isinstance(block, dict):
            return
        inputs = [block.get(k) for k in ("input_tokens", "cache_read_input_tokens",
                                          "cache_creation_input_tokens")]
        if any(isinstance(v, int) for v in inputs):
            usage.input_tokens = sum(_int(v) for v in inputs)
        if isinstance(block.get("output_tokens"), int):
            usage.output_tokens = _int(block["output_tokens"])  # a running total
        usage.seen = True
        return
    block = event.get("usage")
    if isinstance(event.get("response"), dict) and str(event.get("type", "")).startswith(
            "response."):
        block = event["response"].get("usage")
    if not isinstance(block, dict):
        return
    if "prompt_tokens" in block or "completion_tokens" in block:
        usage.input_tokens = _int(block.get("prompt_tokens"))
        usage.output_tokens = _int(block.get("completion_tokens"))
    else:
        usage.input_tokens = _int(block.get("input_tokens"))
        usage.output_tokens = _int(block.get("output_tokens"))
    usage.seen = True


class UsageReader:
    """Reads the usage of one answer from its bytes as they pass, without holding them:
    an SSE stream is split into events line by line (only the current event's data is
    kept); a JSON answer is kept up to ``json_limit`` bytes and read at the end."""

    def __init__(self, api: str, streaming: bool, json_limit: int = 8 << 20):
        self.api = api
        self.streaming = streaming
        self.usage = Usage()
        self._pending = b""
        self._data: list[bytes] = []
        self._json: list[bytes] = []
        self._json_size = 0
        self._json_limit = json_limit

    def feed(self, chunk: bytes) -> None:
        if not self.streaming:
            self._json_size += len(chunk)
            if self._json_size <= self._json_limit:
                self._json.append(chunk)
            return
        # only events that can carry usage are parsed; the rest are skipped by a byte test
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            line = line.rstrip(b"\r")
            if not line:
                self._dispatch()
            elif line.startswith(b"data:"):
                self._data.append(line[5:].lstrip(b" "))

    def _dispatch(self) -> None:
        if not self._data:
            return
        data = b"\n".join(self._data)
        self._data = []
        if b'"usage"' not in data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        apply_usage(self.usage, self.api, event)

    def finish(self) -> Usage:
        if self.streaming:
            if self._pending:
                self.feed(b"\n")
            self._dispatch()
        elif self._json and self._json_size <= self._json_limit:
            with contextlib.suppress(ValueError):
                apply_usage(self.usage, self.api, json.loads(b"".join(self._json)))
        return self.usage
