"""Who may open a websocket, and from which page.

Two kinds of clients reach ``/ws/…``:

- a browser tab of the panel, signed in with the session cookie. A browser always sends
  ``Origin``; it must be amux's own origin — a host in ALLOWED_HOSTS *and* the port the
  browser reached amux on (the handshake's ``Host``). Another web application on the same
  machine (``http://localhost:3000``) is another origin and is refused, so it cannot read
  timelines through the operator's browser.
- a program with an API token, sent as ``Authorization: Token <token>`` or, where a client
  library cannot set headers, as the subprotocol ``amux.token.<token>`` next to ``amux``
  (the server answers ``amux``, never echoing the token). Programs usually send no
  ``Origin``; that is accepted, since a page in a browser cannot leave it out.

A token in the URL is never read: URLs end up in access logs and browser history.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from amux_common import plain_asgi

SUBPROTOCOL = "amux"
TOKEN_SUBPROTOCOL_PREFIX = "amux.token."
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


def _port(port: str, scheme: str) -> int | None:
    if port:
        return int(port) if port.isdigit() else None
    return _DEFAULT_PORTS.get(scheme)


def _served_scheme(scope) -> str:
    forwarded = _header(scope, b"x-forwarded-proto")
    if forwarded:  # behind the TLS proxy SECURE_PROXY_SSL_HEADER already trusts
        return "https" if forwarded.split(",")[0].strip() == "https" else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def origin_allowed(scope) -> bool:
    """No Origin (a program), or the Origin is amux's own: allowed host and served port."""
    origin = _header(scope, b"origin")
    if origin is None:
        return True
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False  # includes the literal "null" of sandboxed and file pages
    if parts.scheme != _served_scheme(scope):
        return False  # https://amux is another origin than http://amux
    try:
        origin_port = parts.port or _DEFAULT_PORTS[parts.scheme]
    except ValueError:
        return False
    origin_host = parts.hostname.lower()
    if not validate_host(origin_host if ":" not in origin_host else f"[{origin_host}]",
                         settings.ALLOWED_HOSTS):
        return False
    host, host_port = split_domain_port(_header(scope, b"host") or "")
    if not host:
        return False
    served_port = _port(host_port, _served_scheme(scope))
    return origin_port == served_port and origin_host == host.strip("[]").lower()


def host_allowed(scope) -> bool:
    """The handshake's Host is one of ALLOWED_HOSTS, by the check HTTP requests get."""
    return plain_asgi.host_allowed(plain_asgi.headers_of(scope))


class OriginValidator:
    """Refuses a handshake whose Host is not one of amux's or whose Origin is not amux's
    own (403 before any consumer runs)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not (host_allowed(scope)
                                                 and origin_allowed(scope)):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)


def presented_token(scope) -> str | None:
    """The API token a program presents (header first, then subprotocol), or None."""
    auth = _header(scope, b"authorization")
    if auth:
        scheme, _, value = auth.strip().partition(" ")
        if scheme.lower() == "token" and value.strip():
            return value.strip()
    for proto in scope.get("subprotocols") or []:
        if proto.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return proto[len(TOKEN_SUBPROTOCOL_PREFIX):]
    return None


def _token_user(token: str):
    from django.contrib.auth.models import AnonymousUser
    from knox.auth import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    try:
        user, _ = TokenAuthentication().authenticate_credentials(token.encode())
    except (AuthenticationFailed, UnicodeError):
        return AnonymousUser()
    return user


class TokenAuthMiddleware:
    """A presented API token decides the user (a wrong token is anonymous, not the cookie's
    user); without one, the session cookie's user (set by AuthMiddleware) stands."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        token = presented_token(scope)
        if token is not None:
            scope = {**scope, "user": await database_sync_to_async(_token_user)(token)}
        return await self.application(scope, receive, send)
