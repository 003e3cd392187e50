"""amux's real ASGI application (amux_site/asgi.py: the git gateway, webhooks, MCP and
Django) under uvicorn in a thread of the test process, so it shares the test's settings and
database (use it from `django_db(transaction=True)` tests). pytest-django's `live_server`
is a WSGI server: it serves Django's views but none of amux's own ASGI paths.

    with AsgiThread() as server:
        settings.AMUX_URL = server.url
"""

from __future__ import annotations

import threading
import time

import uvicorn

from tests.support.asgi import free_port


class AsgiThread:
    def __init__(self, app=None, lifespan: str = "off"):
        if app is None:
            from amux_site.asgi import application as app
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, lifespan=lifespan,
                                log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="asgi-thread",
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(15)
