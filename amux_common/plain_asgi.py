"""JSON endpoints answered straight from ASGI, below Django's request handling.

Django's ASGI handler costs about 4 ms of CPU per request on 2 cores, whatever the view
does: a thread started and joined for every request (asgiref's thread-sensitive context),
two more hops for the request signals, the middleware chain and the request and response
objects. For a webhook that is four times the cost of verifying and storing it. An
endpoint that needs none of it (no cookie, session, CSRF, template or redirect; its caller
proves itself with a signature) is answered here instead: the body is read on the event
loop, the handler runs in one of a few long-lived threads, its database connection goes
back (to the pool) when it returns, as Django's request signals would do, and the answer is
JSON. The Host header is checked against ALLOWED_HOSTS exactly as Django checks it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, reset_queries
from django.http.request import split_domain_port, validate_host

log = logging.getLogger(__name__)

# Threads answering plain endpoints in one server process. Each holds a database
# connection only while it answers; with the pool (AMUX_DB_POOL_SIZE) a thread that finds
# every connection lent waits for one, so this bounds nothing the pool does not.
THREADS = 8
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()

Answer = tuple[int, dict]


def headers_of(scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def error(status: int, code: str, message: str) -> Answer:
    return status, {"error": {"code": code, "message": message, "fields": {}}}


def host_allowed(headers: dict[str, str]) -> bool:
    """What Django's HttpRequest.get_host accepts (its DisallowedHost is a 400)."""
    host = headers.get("host", "")
    if settings.USE_X_FORWARDED_HOST and "x-forwarded-host" in headers:
        host = headers["x-forwarded-host"]
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


class Disconnected(Exception):
    """The client went away before its request's body had all come: nothing to answer."""


async def read_body(receive, limit: int) -> bytes | None:
    """The whole request body, or None once it grows past `limit` bytes (the rest unread).
    Disconnected when the client leaves first: a partial body is never handled as a whole
    one (a webhook's would fail its signature and be counted as forged)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def replaying(body: bytes, receive):
    """A ``receive`` for an app downstream of one that has read the whole body: the body
    as one message, then the client's own messages (its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again():
        return pending.pop() if pending else await receive()

    return again


async def send_json(send, answer: Answer) -> None:
    status, payload = answer
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff")]})
    await send({"type": "http.response.body", "body": body})


async def in_thread(handler: Callable[..., Answer], *args) -> Answer:
    """`handler(*args)` in one of the long-lived threads, as one request: no query log or
    connection left over from before, its connection given back after; anything it raises
    is logged and answered 500, as Django's handler500 answers it."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_threads(), functools.partial(_as_request, handler, *args))


def _as_request(handler: Callable[..., Answer], *args) -> Answer:
    reset_queries()
    close_old_connections()
    try:
        return handler(*args)
    except Exception:
        log.exception("a plain endpoint failed")
        return error(500, "server_error", "the server failed; the error is logged")
    finally:
        close_old_connections()


def _threads() -> ThreadPoolExecutor:
    """Made on first use, so that a server forking its workers forks no thread."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(THREADS, thread_name_prefix="amux-plain")
        return _executor
