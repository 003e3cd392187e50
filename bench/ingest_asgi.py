"""The ASGI app bench/ingest.py serves: amux's own, plus two endpoints answered the way
amux answers webhooks (below Django, amux_common/plain_asgi.py, in the same threads, on the
same pooled connections):

- /bench/floor, the floor of a signed delivery (issue 35): the same request as a signed
  delivery, its HMAC checked, its JSON parsed and its body stored by one INSERT into a
  table with the same unique index as the deliveries' (source, delivery id), bound on the
  server as intake/checked_insert.py binds its own;
- /bench/bare-plain, one INSERT of the body alone (no signature, no parse, no index).

/bench/bare, the bare INSERT as a Django view, is in ingest_urls."""

import hashlib
import hmac
import json

from amux_common import plain_asgi
from amux_site.asgi import application as amux
from bench.ingest_urls import insert_bare

SECRET = b"bench-secret"  # bench/ingest.py signs with it
MAX_BODY = 25 * 1024 * 1024


async def application(scope, receive, send):
    path = scope["path"] if scope["type"] == "http" else ""
    if path == "/bench/floor":
        headers = plain_asgi.headers_of(scope)
        body = await plain_asgi.read_body(receive, MAX_BODY)
        await plain_asgi.send_json(send, await plain_asgi.in_thread(_floor, headers, body))
    elif path == "/bench/bare-plain":
        body = await plain_asgi.read_body(receive, MAX_BODY)
        await plain_asgi.send_json(send, await plain_asgi.in_thread(_bare, body))
    else:
        await amux(scope, receive, send)


def _floor(headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    given = headers.get("x-hub-signature-256", "")
    mac = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac.encode(), given.encode()):
        return plain_asgi.error(401, "not_authenticated", "bad signature")
    try:
        json.loads(body)
    except ValueError:
        return plain_asgi.error(400, "invalid", "bad JSON")
    return 202, {"id": _insert_floor(headers.get("x-github-delivery", ""), body)}


def _insert_floor(delivery_id: str, body: bytes) -> int:
    import psycopg
    from django.db import connection

    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute("INSERT INTO bench_floor (source_id, delivery_id, body) "
                       "VALUES (1, %s, %s) RETURNING id", [delivery_id, body])
        (row_id,) = cursor.fetchone()
    return row_id


def _bare(body: bytes) -> tuple[int, dict]:
    return 202, {"id": insert_bare(body)}
