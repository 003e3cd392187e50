"""Shared by the benches: a throw-away PostgreSQL database next to DATABASE_URL's."""

from __future__ import annotations

import contextlib
import os
import sys
from urllib.parse import urlsplit, urlunsplit

import psycopg


def server_url(name: str) -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("this bench needs PostgreSQL: set DATABASE_URL=postgres://user@host:port/db")
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _admin_conn():
    conn = psycopg.connect(server_url("postgres"), autocommit=True)
    return conn


@contextlib.contextmanager
def scratch_database(name: str):
    """Create database `name` (dropping a leftover), yield its URL, drop it after."""
    with _admin_conn() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server_url(name)
    finally:
        with _admin_conn() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(url: str, migrate: bool = False) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "amux_site.settings")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
