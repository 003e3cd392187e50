"""Settings for bench/ingest.py: the real app, plus a bare one-INSERT endpoint (ingest_urls)."""

from amux_site.settings import *  # noqa: F403

ROOT_URLCONF = "bench.ingest_urls"
ALLOWED_HOSTS = ["*"]

# Under ASGI each request may run in another thread: persistent connections would pile up
# (one per thread) until PostgreSQL refuses clients. Both endpoints pay the same connect.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
