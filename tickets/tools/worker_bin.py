"""Put the `amux` command into a worker's bin directory (first on its PATH)."""

from __future__ import annotations

import os
from pathlib import Path

CLI_SOURCE = Path(__file__).with_name("amux_cli.py")


def install_worker_bin(directory: str | os.PathLike, python: str | None = None) -> Path:
    """Write the `amux` shim (a stdlib-only Python script) into `directory` and return its
    path. Idempotent: an existing shim is replaced atomically. The worker finds amux through
    AMUX_API_URL and AMUX_ASSIGNMENT_TOKEN in its environment. The shim runs with the
    worker's `python3` (`#!/usr/bin/env python3`) unless `python` names an interpreter."""
    target_dir = Path(directory)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / "amux"
    partial = target_dir / ".amux.partial"
    source = CLI_SOURCE.read_bytes()
    if python:
        _first, _, rest = source.partition(b"\n")
        source = f"#!{python}".encode() + b"\n" + rest
    partial.write_bytes(source)
    partial.chmod(0o755)
    os.replace(partial, target)
    return target


def worker_env(base_url: str, token: str | None = None, *,
               token_file: str | None = None) -> dict[str, str]:
    """The variables a worker session needs to reach its tools. `base_url` is where amux
    serves, e.g. http://127.0.0.1:8000; the token is given directly or as a file that amux
    rewrites on every dispatch (so a long-lived session follows re-issued tokens)."""
    base = base_url.rstrip("/")
    env = {"AMUX_API_URL": f"{base}/api/v1", "AMUX_MCP_URL": f"{base}/mcp"}
    if token:
        env["AMUX_ASSIGNMENT_TOKEN"] = token
    if token_file:
        env["AMUX_ASSIGNMENT_TOKEN_FILE"] = token_file
    return env


def mcp_server_config(base_url: str, token: str) -> dict:
    """An MCP client entry for the worker's runtime (streamable HTTP with the bearer)."""
    return {"type": "http", "url": f"{base_url.rstrip('/')}/mcp",
            "headers": {"Authorization": f"Bearer {token}"}}


def mcp_server_entry(base_url: str, token_file: str, name: str = "amux") -> dict:
    """amux's MCP server as a session's ``mcp_servers`` entry: the runtime reads the bearer
    from ``token_file`` (rewritten on every dispatch) when it starts, and is restarted
    between turns when the file holds a new token."""
    return {"name": name, "url": f"{base_url.rstrip('/')}/mcp",
            "bearer_token_file": str(token_file)}
