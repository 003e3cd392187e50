"""Pooled PostgreSQL connections (settings.AMUX_DB_POOL_SIZE) across fork.

A forked child shares its parent's sockets: a connection or pool the parent had open must
never be used or closed in the child, or the parent's sessions with the server break
(closing sends a Terminate message on the shared socket). Processes that fork workers close
their pools first (`close_all`); a Celery prefork child drops anything it inherited anyway
(`forget_inherited`, on `worker_process_init`, before Celery's Django fixup runs) and
borrows from a pool of its own, made on its first query.
"""

from __future__ import annotations

import contextlib
import os

from django.db import connections


def close_all() -> None:
    """Give back this thread's connections and close this process's pools."""
    for conn in connections.all(initialized_only=True):
        conn.close()
        if getattr(conn, "pool", None) is not None:
            conn.close_pool()


def forget_inherited() -> None:
    """In a child just forked: drop the parent's connections and pools without a byte on
    their sockets. Each inherited socket is first pointed at /dev/null, so when psycopg
    closes the child's copy its goodbye reaches nobody, and the descriptor's number cannot
    meanwhile name a file the child opened."""
    held = []
    for conn in connections.all(initialized_only=True):
        if conn.vendor == "postgresql" and conn.connection is not None:
            held.append(conn.connection)
            conn.connection = None
    try:
        from django.db.backends.postgresql.base import DatabaseWrapper
    except ImportError:  # no psycopg: nothing can be pooled
        pools = {}
    else:
        pools = DatabaseWrapper._connection_pools
    for pool in list(pools.values()):
        held.extend(pool._pool)  # its idle connections (the ones lent out are in `held`)
        pool._closed = True  # its threads stayed in the parent: nothing to stop here
    pools.clear()
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        for raw in held:
            with contextlib.suppress(Exception):  # not a socket-backed connection
                os.dup2(devnull, raw.pgconn.socket)
    finally:
        os.close(devnull)
    held.clear()
