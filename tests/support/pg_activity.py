"""What PostgreSQL itself says about connections to the test database (pg_stat_activity),
for tests of pooled connections."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="connection pooling is for PostgreSQL only; SQLite connections are never pooled")


def _server_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgresql://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def backends(exclude: frozenset[int] | set[int] = frozenset()) -> set[int]:
    """Server connections to the test database (but the one asking), less `exclude`."""
    with psycopg.connect(_server_url(), autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s "
                            "AND pid <> pg_backend_pid()", [connection.settings_dict["NAME"]])
        return {pid for (pid,) in rows} - exclude


class Sampled:
    """Server connections to the test database opened meanwhile by others: the most at one
    time (sampled every 50 ms) and every one seen."""

    def __init__(self):
        self.before = backends()
        self.peak, self.seen = 0, set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def _sample(self):
        while not self._done.wait(0.05):
            now = backends(self.before)
            self.seen |= now
            self.peak = max(self.peak, len(now))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join(10)
