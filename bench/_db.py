"""Shared by the benches: a throw-away PostgreSQL database on DATABASE_URL's server, or on
an embedded server under var/bench/pg when DATABASE_URL is not set.

The embedded server is PostgreSQL's own binaries (initdb, pg_ctl from the local install,
e.g. /usr/lib/postgresql/15/bin) on a free loopback port, owned by the data directory like
the embedded Redis: `var/bench/pg/server.json` records its port so every bench process of
one run shares it. Run as root, it runs as the `postgres` (else `nobody`) account, because
PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parents[1]
PG_DIR = ROOT / "var" / "bench" / "pg"


class NoPostgres(RuntimeError):
    """No PostgreSQL to measure on: DATABASE_URL unset and no server binaries installed."""


def pg_bin_dir() -> Path | None:
    """The newest local PostgreSQL server install that has initdb and pg_ctl, if any."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                        else 0)
    for path in reversed(candidates):
        if all(os.access(Path(path) / tool, os.X_OK) for tool in ("initdb", "pg_ctl")):
            return Path(path)
    for tool_dir in {os.path.dirname(shutil.which("initdb") or "")} - {""}:
        if shutil.which("pg_ctl"):
            return Path(tool_dir)
    return None


def _run_as() -> dict:
    """Popen arguments that drop root (PostgreSQL will not run as root)."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return {"user": entry.pw_uid, "group": entry.pw_gid}
    raise NoPostgres("running as root and no 'postgres' or 'nobody' account to run PostgreSQL")


def _answers(port: int) -> bool:
    try:
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres",
                             connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def embedded_url() -> str | None:
    """The running embedded server's URL (its `postgres` database), if one is running."""
    try:
        port = int(json.loads((PG_DIR / "server.json").read_text())["port"])
    except (OSError, ValueError, KeyError):
        return None
    return f"postgresql://postgres@127.0.0.1:{port}/postgres" if _answers(port) else None


def start_embedded() -> str:
    """Start (initialising on first use) the embedded server; return its URL."""
    url = embedded_url()
    if url:
        return url
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        raise NoPostgres("no PostgreSQL to measure on: DATABASE_URL is not set and no server "
                         "binaries (initdb, pg_ctl) are installed under /usr/lib/postgresql "
                         "(apt-get install postgresql)")
    as_user = _run_as()
    data = PG_DIR / "data"
    PG_DIR.mkdir(parents=True, exist_ok=True)
    if as_user:
        os.chown(PG_DIR, as_user["user"], as_user["group"])
    if not (data / "PG_VERSION").exists():
        shutil.rmtree(data, ignore_errors=True)
        subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True, cwd="/", **as_user)
    port = _free_port()
    options = (f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
               "-c max_connections=300")
    result = subprocess.run(
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(PG_DIR / "server.log"),
         "-o", options, "-w", "-t", "60", "start"],
        capture_output=True, text=True, cwd="/", **as_user)
    if result.returncode != 0:
        log = (PG_DIR / "server.log").read_text(errors="replace")[-2000:] \
            if (PG_DIR / "server.log").exists() else ""
        raise NoPostgres(f"embedded PostgreSQL did not start: {result.stderr.strip()} {log}")
    deadline = time.monotonic() + 30
    while not _answers(port):
        if time.monotonic() > deadline:
            raise NoPostgres(f"embedded PostgreSQL on port {port} does not answer")
        time.sleep(0.1)
    (PG_DIR / "server.json").write_text(json.dumps({"port": port}))
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def stop_embedded() -> bool:
    """Stop the embedded server if it runs (its data stays for the next run)."""
    bin_dir = pg_bin_dir()
    state = PG_DIR / "server.json"
    if bin_dir is None or not state.exists():
        return False
    subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(PG_DIR / "data"), "-m", "fast", "-w",
                    "stop"], capture_output=True, cwd="/", **_run_as())
    state.unlink(missing_ok=True)
    return True


def server_base() -> str:
    """The server every scratch database goes on: DATABASE_URL's, else the embedded one."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        return url
    if url:
        raise NoPostgres(f"this bench needs PostgreSQL; DATABASE_URL is {url.split(':')[0]}")
    return start_embedded()


def server_url(name: str) -> str:
    parts = urlsplit(server_base())
    return urlunsplit(parts._replace(path=f"/{name}"))


def scratch_name(name: str) -> str:
    """`name`, prefixed with DATABASE_URL's own database name when it has one of its own, so
    that checkouts sharing one server (wt_a, wt_b) never drop each other's scratch databases."""
    own = urlsplit(os.environ.get("DATABASE_URL", "")).path.lstrip("/")
    if own and own not in ("postgres", "amux") and not name.startswith(own):
        name = f"{own}_{name}"
    return name[:63]


def _admin_conn():
    return psycopg.connect(server_url("postgres"), autocommit=True)


@contextlib.contextmanager
def scratch_database(name: str):
    """Create database `name` (dropping a leftover), yield its URL, drop it after."""
    name = scratch_name(name)
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
    os.environ.setdefault("AMUX_DATA_DIR", str(ROOT / "var" / "bench"))
    import sys

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench._setup import BENCH_POOL, remove_runtime_users

    os.environ.setdefault("AMUX_RUNTIME_POOL", BENCH_POOL)
    # a bench run on its own (python -m bench.<name>) leaves no runtime users either
    atexit.register(remove_runtime_users, os.environ["AMUX_RUNTIME_POOL"])
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
