"""amux's git gateway: git's smart HTTP at `/gateway/git/<owner>/<repo>.git/…`, the only
git host a worker reaches (CONTRACT: the gateways).

The worker authenticates with HTTP Basic whose password is its assignment token (any user
name); its ticket's repository is the only one it sees. amux forwards each request to the
repository's real URL (the `clone_url` its GitHub source reports) with the source's own
credential, added here, so that credential never leaves amux. Fetches and clones pass
through untouched (any ref). A push is read up to the end of its command list: when every
update is of the ticket's own branch it is forwarded whole, otherwise nothing reaches the
upstream and the gateway answers as receive-pack would, refusing each ref with the rule
(tickets/core/git_push.py), so `git push` prints its own "! [remote rejected]" lines.

Bodies stream both ways in chunks (a pack is never held whole in memory) and are never
logged. Served straight from ASGI like the webhooks (amux_common/plain_asgi.py): the token
and the upstream are looked up in one of plain_asgi's threads, the bytes move on the loop.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import ssl
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from amux_common import plain_asgi
from tickets import workspace
from tickets.core import git_push
from tickets.read import assignment_for_token

log = logging.getLogger(__name__)

PREFIX = "/gateway/git/"
_PATH = re.compile(r"/gateway/git/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/"
                   r"(info/refs|git-upload-pack|git-receive-pack)")
SERVICES = ("git-upload-pack", "git-receive-pack")
REALM = b'Basic realm="amux git gateway"'
MAX_COMMANDS = 1 << 20  # a push's command list: ~10,000 refs, far more than a worker sends
CHUNK = 1 << 16
# A large clone can be quiet for minutes while the host packs it; a stalled one still ends.
TIMEOUT = httpx.Timeout(connect=15.0, read=600.0, write=600.0, pool=15.0)
FORWARDED = ("content-type", "accept", "accept-encoding", "content-encoding", "git-protocol")
ANSWERED = (b"content-type", b"content-encoding", b"cache-control", b"expires", b"pragma")
_ssl_context: ssl.SSLContext | None = None


def is_gateway_path(path: str) -> bool:
    return path.startswith(PREFIX)


@dataclass(frozen=True)
class Route:
    """Where one worker's git request goes, and as whom."""

    ticket_id: int
    upstream: str  # the repository's URL, without a trailing slash
    authorization: str  # the upstream Authorization header: never sent to the worker
    own_branch: str


Refused = tuple[int, str]


async def answer(scope, receive, send) -> None:
    headers = plain_asgi.headers_of(scope)
    if not plain_asgi.host_allowed(headers):
        await _text(send, 400, "the Host header names a host this server does not serve "
                    "(AMUX_ALLOWED_HOSTS)")
        return
    found = _PATH.fullmatch(scope["path"])
    if found is None:
        await _text(send, 404, "not a git repository path of amux's gateway "
                    "(/gateway/git/<owner>/<repo>.git)")
        return
    owner, name, action = found.groups()
    query = scope.get("query_string", b"").decode("latin-1")
    refused = _refused_request(scope["method"], action, query)
    if refused is not None:
        await _text(send, *refused)
        return
    token = _basic_password(headers.get("authorization", ""))
    if token is None:
        await _text(send, 401, "authenticate with your assignment token as the password")
        return
    route = await plain_asgi.in_thread(_route, token, f"{owner}/{name}")
    if not isinstance(route, Route):
        status, detail = route
        await _text(send, status, detail if isinstance(detail, str)
                    else detail["error"]["message"])
        return
    try:
        if action == "git-receive-pack":
            gzipped = headers.get("content-encoding", "").lower() in ("gzip", "x-gzip")
            await _push(send, route, query, headers, _incoming(receive, gzipped=gzipped))
        else:
            body = _incoming(receive, gzipped=False) if scope["method"] == "POST" else None
            await _forward(send, route, action, query, headers, body)
    except plain_asgi.Disconnected:
        return  # the worker's git went away: nothing to answer, the upstream call is closed
    except Undecodable:
        await _text(send, 400, "the push's body is not the gzip its Content-Encoding says")


class Undecodable(ValueError):
    """A request body that is not what its Content-Encoding says."""


def _refused_request(method: str, action: str, query: str) -> Refused | None:
    if action == "info/refs":
        if method != "GET":
            return 405, "info/refs is read with GET"
        if dict(p.partition("=")[::2] for p in query.split("&")).get("service") not in SERVICES:
            return 403, "amux's git gateway serves git's smart HTTP only (service=git-…-pack)"
        return None
    if method != "POST":
        return 405, f"{action} takes POST"
    return None


def _basic_password(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        _user, colon, password = base64.b64decode(value.strip(), validate=True
                                                  ).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return password if colon and password else None


def _route(token: str, repo: str) -> Route | Refused:
    """The live assignment's route to `repo` (in a plain_asgi thread: ORM and GitHub)."""
    assignment = assignment_for_token(token)
    if assignment is None or assignment.ticket.ended_at is not None:
        return 401, "unknown, replaced or ended assignment token"
    ticket = assignment.ticket
    try:
        found = workspace.repository_of(ticket)
    except workspace.WorkspaceError:
        found = None
    if found is None or found[1].lower() != repo.lower():
        return 404, f"repository {repo} not found (this token serves its ticket's repository)"
    source, own = found
    try:
        origin = workspace.origin_for(source, own)
        authorization = workspace.upstream_authorization(source, origin)
    except workspace.WorkspaceError as exc:
        return 503, f"the git host cannot be reached now: {exc}"
    return Route(ticket.pk, origin.clone_url.rstrip("/"), authorization,
                 workspace.branch_name(ticket))


async def _push(send, route: Route, query: str, headers: dict, incoming) -> None:
    """Read the command list, then forward the push whole, or refuse it whole without a
    byte of it reaching the upstream."""
    buffer = b""
    request = None
    async for chunk in incoming:
        buffer += chunk
        try:
            request = git_push.parse_commands(buffer)
        except git_push.Malformed as exc:
            await _drain_and_answer(send, incoming, 400, f"not a push amux takes: {exc}")
            return
        if request is not None:
            break
        if len(buffer) > MAX_COMMANDS:
            await _drain_and_answer(send, incoming, 413, "the push's command list is too long")
            return
    if request is None:
        await _text(send, 400, "the push ended before its command list did")
        return
    reasons = git_push.refusals(request, route.own_branch)
    if reasons is None:
        await _forward(send, route, "git-receive-pack", query, headers,
                       _joined(buffer, incoming), decoded=True)
        return
    log.info("git gateway: ticket %s push refused (%s)", route.ticket_id,
             ", ".join(sorted(reasons)))
    async for _rest in incoming:
        pass  # git sends its whole pack before it reads an answer: read it, keep none
    if not git_push.reports_status(request.capabilities):
        await _text(send, 403, "\n".join(f"{ref}: {why}" for ref, why in reasons.items()))
        return
    body = git_push.report(reasons, request.capabilities)
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/x-git-receive-pack-result"),
        (b"cache-control", b"no-cache, max-age=0, must-revalidate"),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _drain_and_answer(send, incoming, status: int, message: str) -> None:
    async for _rest in incoming:
        pass
    await _text(send, status, message)


async def _forward(send, route: Route, action: str, query: str, headers: dict,
                   body: AsyncIterator[bytes] | None, decoded: bool = False) -> None:
    """The request to the upstream with amux's credential, its answer streamed back.
    `decoded`: the body was un-gzipped here, so its Content-Encoding is not passed on."""
    url = f"{route.upstream}/{action}" + (f"?{query}" if query else "")
    out = {name: headers[name] for name in FORWARDED if name in headers}
    if decoded:
        out.pop("content-encoding", None)
    out.setdefault("accept-encoding", "identity")
    out["authorization"] = route.authorization
    out["user-agent"] = headers.get("user-agent") or "git/amux-gateway"
    method = "GET" if body is None else "POST"
    started = False
    # trust_env: a proxy set for amux (HTTPS_PROXY, NO_PROXY) applies here as to its own git
    async with httpx.AsyncClient(timeout=TIMEOUT, verify=_ssl(), trust_env=True) as client:
        try:
            async with client.stream(method, url, headers=out, content=body) as upstream:
                if upstream.status_code in (401, 403):
                    log.warning("git gateway: the git host refused the source's credential "
                                "for ticket %s (HTTP %s)", route.ticket_id,
                                upstream.status_code)
                    await _text(send, 502, "the git host refused amux's credential for this "
                                "repository; an operator must renew the source's token")
                    return
                await send({"type": "http.response.start", "status": upstream.status_code,
                            "headers": [(k, v) for k, v in upstream.headers.raw
                                        if k.lower() in ANSWERED]})
                started = True
                async for chunk in upstream.aiter_raw(CHUNK):
                    await send({"type": "http.response.body", "body": chunk,
                                "more_body": True})
                await send({"type": "http.response.body", "body": b""})
        except httpx.HTTPError as exc:
            log.warning("git gateway: ticket %s %s failed: %s", route.ticket_id, action,
                        type(exc).__name__)
            if not started:
                await _text(send, 502, "the git host did not answer; try again")
            # once the answer has started, ending it short is all git needs to fail cleanly
        except OSError:
            return  # the worker's side of the connection closed while we answered


async def _incoming(receive, *, gzipped: bool) -> AsyncIterator[bytes]:
    """The request body as it arrives (un-gzipped when `gzipped`, a bounded slice at a
    time, so a compressed bomb never lands in memory whole). Disconnected when the client
    leaves before its end."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzipped else None
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise plain_asgi.Disconnected
        chunk = message.get("body", b"")
        if inflate is None:
            if chunk:
                yield chunk
        else:
            data = chunk
            while data:
                try:
                    out = inflate.decompress(data, CHUNK)
                except zlib.error:
                    raise Undecodable from None
                if out:
                    yield out
                data = inflate.unconsumed_tail
        if not message.get("more_body"):
            return


async def _joined(head: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield head
    async for chunk in rest:
        yield chunk


async def _text(send, status: int, message: str) -> None:
    """An error git shows its user (it prints a text/plain body on a failed request)."""
    body = (message.rstrip("\n") + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-cache")]
    if status == 401:
        headers.append((b"www-authenticate", REALM))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _ssl() -> ssl.SSLContext:
    """One TLS context for every upstream call (the system's CAs, as amux's own git)."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = ssl.create_default_context()
    return _ssl_context
