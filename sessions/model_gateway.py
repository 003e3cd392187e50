"""amux's model gateway: `/gateway/model/<api>/…`, the only model provider a session's
runtime reaches (CONTRACT: the gateways; ARCHITECTURE: the security boundary).

A runtime is configured with the gateway as its base URL and its session's credential as
its key (sessions/model_credentials.py). Each request is checked (credential, route,
the caps the apps above registered) and forwarded to the session's provider with the
provider's key, added here; the answer streams back chunk by chunk as it arrives. A client
that goes away mid-answer closes the provider's request. The usage the provider reports in
its answer is counted once, per request, into the session's daily record.

Served straight from ASGI (amux_common/plain_asgi.py's checks and body reading): the
database work runs on the gateway's own threads, which keep their connections
(sessions/gateway_threads.py), the bytes move on the loop, through one keep-alive HTTP
client per process (per event loop). Bodies are never logged: sizes and timing only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass

import httpx

from amux_common import metrics, plain_asgi
from sessions import gateway_rules as rules
from sessions import hooks, model_credentials, request_prompts
from sessions.gateway_threads import lookups

log = logging.getLogger(__name__)

MAX_REQUEST = 64 << 20  # a long conversation with images; far beyond it is a mistake
# A reasoning model may think for minutes before its first byte; the runtime's own
# watchdogs bound a stalled turn.
# How long a model request waits for the count of its session's previous answer (written
# off that answer's path, in this process); past it the request is checked as things are.
COUNT_WAIT = 5.0
TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=10.0)
LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50,
                      keepalive_expiry=60.0)
_clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}


def is_gateway_path(path: str) -> bool:
    return path.startswith(rules.PREFIX)


@dataclass(frozen=True)
class Refused:
    status: int
    message: str
    code: str | None = None
    # the OpenAI and Anthropic clients (Pi, Claude Code) retry a 429 unless told not to;
    # a cap does not lift by retrying
    final: bool = False


class Uncounted:
    """An answer whose tokens have reached (or are reaching) the runtime but are not counted
    yet. The count is written after the answer is passed back, off its critical path; the
    same credential's next request waits for it (``settled``), so a spend cap checked then
    sees every token already spent. Marked synchronously before the bytes that carry the
    usage go out, so a runtime can never have them before the mark. Per process: the web
    server (`amux run`) is one."""

    _open: dict[str, tuple[list[int], asyncio.Event]] = {}

    def __init__(self, token: str):
        self.token = token
        self.marked = False

    def mark(self) -> None:
        if self.marked:
            return
        self.marked = True
        count, _ = self._open.setdefault(self.token, ([0], asyncio.Event()))
        count[0] += 1

    def done(self) -> None:
        if not self.marked:
            return
        self.marked = False
        count, event = self._open[self.token]
        count[0] -= 1
        if count[0] <= 0:
            del self._open[self.token]
            event.set()

    @classmethod
    async def settled(cls, token: str) -> None:
        entry = cls._open.get(token)
        if entry is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry[1].wait(), COUNT_WAIT)


async def answer(scope, receive, send) -> None:
    started = time.monotonic()
    path, method = scope["path"], scope["method"]
    api = _api_of(path)
    headers = plain_asgi.headers_of(scope)
    if not plain_asgi.host_allowed(headers):
        await _error(send, api, Refused(400, "the Host header names a host this server does "
                                             "not serve (AMUX_ALLOWED_HOSTS)"))
        return
    try:
        route = rules.route_of(path, method)
    except rules.WrongMethod as exc:
        await _error(send, api, Refused(405, f"{path} takes {exc.allowed}"),
                     [(b"allow", exc.allowed.encode())])
        return
    except rules.NotFound:
        await _error(send, api, Refused(404, "not a path of amux's model gateway "
                                             "(/gateway/model/openai/responses, "
                                             "…/openai/chat/completions, …/openai/models, "
                                             "…/anthropic/v1/messages, …/anthropic/v1/models)"))
        return
    token = rules.credential_of(headers)
    if not rules.looks_like_credential(token):
        await _error(send, api, Refused(401, "unknown or revoked session credential",
                                        "invalid_api_key"))
        return
    try:
        body = await plain_asgi.read_body(receive, MAX_REQUEST) if method == "POST" else b""
    except plain_asgi.Disconnected:
        return
    if body is None:
        await _error(send, api, Refused(413, "the request body is too large"))
        return
    if route.kind == "generate":
        await Uncounted.settled(token)  # the tokens this session spent just before count
    try:
        admitted = await lookups.run(_admit, token, route, body)
    except Exception:
        log.exception("model gateway: a request could not be checked")
        await _error(send, api, Refused(500, "the gateway failed; the error is logged"))
        return
    if isinstance(admitted, Refused):
        await _error(send, api, admitted)
        return
    grant, body, used = admitted
    uncounted = Uncounted(token)
    try:
        status, sent, usage = await _forward(
            receive, send, route, grant, headers,
            scope.get("query_string", b"").decode("latin-1"), body, uncounted)
        log.info("model gateway: %s %s %s -> %s, %d bytes in, %d bytes out, %.1f ms",
                 grant.holder, method, route.rest, status, len(body), sent,
                 (time.monotonic() - started) * 1000)
        if route.kind == "generate":
            metrics.model_request(
                grant.provider, grant.model, "ok" if 200 <= status < 300 else "upstream_error",
                usage.input_tokens if usage else 0, usage.output_tokens if usage else 0)
        await _left_behind(grant, usage, used)
    finally:
        uncounted.done()


async def _left_behind(grant: model_credentials.Grant, usage: rules.Usage | None,
                       used: request_prompts.Used | None) -> None:
    """What the request leaves behind, written once its answer has been passed back (off
    its critical path): the tokens it spent, the prompt revisions its turn used (each on
    its own: a lookup that fails is tried once more, and must not count twice); a spawned
    app-server's usage reaches its attached sessions from Codex's own reports."""
    if usage is not None and usage.total > 0 and grant.session_id is not None:
        try:
            await lookups.run(model_credentials.usage_counted, grant.session_id, usage.total)
        except Exception:
            log.exception("model gateway: session %s's usage could not be counted",
                          grant.session_id)
    if used is not None:
        try:
            await lookups.run(request_prompts.record, used)
        except Exception:
            log.exception("model gateway: session %s's prompt revisions could not be "
                          "recorded", grant.session_id)


def _admit(token: str, route: rules.Route, body: bytes
           ) -> tuple[model_credentials.Grant, bytes, request_prompts.Used | None] | Refused:
    """The credential's grant, the body to forward (a model call's with the session's
    current prompt in its marked block) and the revisions its turn is to record after the
    answer, or why the request is refused: on a lookup thread, in one trip there."""
    grant = model_credentials.grant_for(token)
    if grant is None:
        return Refused(401, "unknown or revoked session credential", "invalid_api_key",
                       final=True)
    own = rules.API_OF_PLATFORM.get(grant.platform)
    if own != route.api:
        return Refused(404, f"this session's provider speaks the {own} API: use "
                            f"/gateway/model/{own}/…")
    if route.kind == "generate" and grant.session_id is not None:
        refusal = hooks.model_request_caps.refusal(grant.session_id, grant.probed)
        if refusal:
            metrics.model_request(grant.provider, grant.model, "capped")
            return Refused(429, refusal, "insufficient_quota", final=True)
        if rules.has_marked(body):
            return grant, *request_prompts.applied(grant.session_id, body)
    return grant, body, None


async def _forward(receive, send, route: rules.Route, grant: model_credentials.Grant,
                   headers: dict[str, str], query: str, body: bytes, uncounted: Uncounted
                   ) -> tuple[int, int, rules.Usage | None]:
    """The request to the provider with its key; its answer passed back as it arrives.
    Answers (status, bytes sent, usage read or None)."""
    out = rules.forwarded_headers(headers)
    if grant.key:
        out.update(rules.auth_headers(route.api, grant.key))
    client = _client()
    request = client.build_request(
        "POST" if route.kind != "list" else "GET", rules.upstream_url(grant.base_url, route,
                                                                     query),
        headers=out, content=body if route.kind != "list" else None, timeout=TIMEOUT)
    try:
        upstream = await client.send(request, stream=True)
    except httpx.TimeoutException:
        log.warning("model gateway: %s: the provider did not answer in time",
                    grant.holder)
        await _error(send, route.api, Refused(504, "the model provider did not answer in "
                                                   "time"))
        return 504, 0, None
    except httpx.HTTPError as exc:
        log.warning("model gateway: %s: the provider cannot be reached (%s)",
                    grant.holder, type(exc).__name__)
        await _error(send, route.api, Refused(502, "the model provider cannot be reached"))
        return 502, 0, None
    try:
        return await _pass_back(receive, send, route, grant, upstream, uncounted)
    finally:
        await upstream.aclose()


async def _pass_back(receive, send, route: rules.Route, grant: model_credentials.Grant,
                     upstream: httpx.Response, uncounted: Uncounted
                     ) -> tuple[int, int, rules.Usage | None]:
    status = upstream.status_code
    content_type = upstream.headers.get("content-type", "")
    if status in (401, 403):
        # the provider refused amux's key: its answer may quote part of that key
        log.warning("model gateway: the provider refused the key of %s's provider "
                    "(HTTP %s)", grant.holder, status)
        await _error(send, route.api, Refused(502, "the model provider refused amux's key; "
                                                   "an operator must renew it"))
        return 502, 0, None
    if status >= 400 and "json" not in content_type:
        await _error(send, route.api, Refused(status, f"the model provider answered HTTP "
                                                      f"{status}"))
        return status, 0, None
    streaming = "text/event-stream" in content_type
    reader = (rules.UsageReader(route.api, streaming)
              if route.kind == "generate" and status < 400 else None)
    await send({"type": "http.response.start", "status": status,
                "headers": rules.answered_headers(upstream.headers.raw)})
    sent = 0

    async def pump() -> None:
        nonlocal sent
        async for chunk in upstream.aiter_raw():
            if reader is not None:
                reader.feed(chunk)
                # a JSON answer's usage is read at its end, a stream's as it passes: either
                # way marked before the runtime can have it (Uncounted)
                if not streaming or reader.usage.total > 0:
                    uncounted.mark()
            sent += len(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    pumping = asyncio.ensure_future(pump())
    leaving = asyncio.ensure_future(_disconnected(receive))
    try:
        done, _ = await asyncio.wait({pumping, leaving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        leaving.cancel()
    if pumping not in done:  # the runtime went away: stop reading (closes the upstream)
        pumping.cancel()
        with contextlib.suppress(BaseException):
            await pumping
        log.info("model gateway: %s left mid-answer; the provider's request is "
                 "closed", grant.holder)
        return status, sent, reader.finish() if reader else None
    try:
        pumping.result()
    except (httpx.HTTPError, OSError) as exc:
        # the answer has started: ending it short is how the runtime learns of the fault
        log.warning("model gateway: %s: the provider's answer broke off (%s)",
                    grant.holder, type(exc).__name__)
    return status, sent, reader.finish() if reader else None


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _error(send, api: str | None, refused: Refused,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(rules.error_body(api, refused.status, refused.message,
                                       refused.code)).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), *(extra or [])]
    if refused.final:
        headers.append((b"x-should-retry", b"false"))
    with contextlib.suppress(OSError):
        await send({"type": "http.response.start", "status": refused.status,
                    "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _api_of(path: str) -> str | None:
    """The API a path names, for the shape of an error about it."""
    api = path[len(rules.PREFIX):].partition("/")[0]
    return api if api in ("openai", "anthropic") else None


def _client() -> httpx.AsyncClient:
    """One keep-alive client per event loop (a connection belongs to the loop that opened
    it): a new TCP connection per request would cost the latency budget."""
    loop = asyncio.get_running_loop()
    found = _clients.get(id(loop))
    if found is None or found[0] is not loop or found[1].is_closed:
        # trust_env: a proxy set for amux (HTTPS_PROXY, NO_PROXY) applies here too
        client = httpx.AsyncClient(timeout=TIMEOUT, limits=LIMITS, trust_env=True)
        _clients[id(loop)] = (loop, client)
        return client
    return found[1]
