"""The ASGI app bench/ingest.py serves: amux's own, plus the bare one-INSERT endpoint
answered the way amux answers webhooks (below Django, amux_common/plain_asgi.py) at
/bench/bare-plain. /bench/bare, the same INSERT as a Django view, is in ingest_urls."""

from amux_common import plain_asgi
from amux_site.asgi import application as amux
from bench.ingest_urls import insert_bare


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/bench/bare-plain":
        body = await plain_asgi.read_body(receive, 25 * 1024 * 1024)
        await plain_asgi.send_json(send, await plain_asgi.in_thread(_bare, body))
    else:
        await amux(scope, receive, send)


def _bare(body: bytes) -> tuple[int, dict]:
    return 202, {"id": insert_bare(body)}
