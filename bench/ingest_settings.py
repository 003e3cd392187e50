"""Settings for bench/ingest.py: the real app, plus a bare one-INSERT endpoint (ingest_urls).

Connections are as amux_site.settings makes them (pooled unless AMUX_DB_POOL_SIZE=0): both
endpoints borrow theirs the same way."""

from amux_site.settings import *  # noqa: F403

ROOT_URLCONF = "bench.ingest_urls"
ALLOWED_HOSTS = ["*"]
