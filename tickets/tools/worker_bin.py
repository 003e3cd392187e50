"""The worker's command directory (first on its PATH) and its git configuration.

Seed 002's setup: amux writes the commands a worker may use into one directory — `amux`
(its tools), `git-credential-amux` (git's credential for amux's git gateway: the
assignment token, never an upstream one), `gh` and `lark-cli` shims that act through amux
as the agent or say plainly that they cannot, and one shim per command the operator
disabled, which fails naming the setting — and a gitconfig that replaces the operator's. A
file in that directory that amux did not write fails the setup: nobody slips a command in
front of the worker. The commands amux runs for a shim never see the directory on PATH
(amux_cli strips it), so a shim cannot call itself or another shim by accident.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

CLI_SOURCE = Path(__file__).with_name("amux_cli.py")

# The shims run the `amux` command next to them (they never look it up on PATH).
SHIMS = {
    "git-credential-amux": '#!/bin/sh\nexec "$(dirname "$0")/amux" git-credential "$@"\n',
    "gh": '#!/bin/sh\nexec "$(dirname "$0")/amux" gh "$@"\n',
    "lark-cli": '#!/bin/sh\nexec "$(dirname "$0")/amux" lark-cli "$@"\n',
}
MANAGED = frozenset({"amux", *SHIMS})
# A disabled command's shim; its first lines mark it as amux's own (check_worker_bin), so
# one the operator re-enables is removed on the next setup rather than refused as foreign.
DISABLED_MARK = "# amux: a disabled command"
DISABLED_MAX = 100
COMMAND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
GITCONFIG_MODE = 0o644  # no secret in it; a linux-dac worker's git reads it as another user


class WorkerSetupError(RuntimeError):
    """The worker's command directory holds something amux did not put there."""


def _write(target: Path, data: bytes) -> None:
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    os.replace(partial, target)


def disabled_shim(name: str) -> str:
    """The script that stands in for a command the operator disabled: it fails (126, as a
    shell does for a command it cannot run) and says where the setting is."""
    return (f"#!/bin/sh\n{DISABLED_MARK}\n"
            f"echo '{name} is disabled for amux workers (Panel \u2192 Triage \u2192 Agent "
            "settings: disabled commands)' >&2\nexit 126\n")


def check_disabled(names) -> list[str]:
    """The operator's disabled commands, each a plain command name amux does not provide
    itself; raises ValueError naming every name that is not."""
    if len(names) > DISABLED_MAX:
        raise ValueError(f"at most {DISABLED_MAX} commands")
    wrong = [n for n in names if not isinstance(n, str) or not COMMAND_NAME.fullmatch(n)]
    if wrong:
        raise ValueError(f"not a command name: {', '.join(map(str, wrong))}")
    ours = sorted(set(names) & MANAGED)
    if ours:
        raise ValueError(f"amux provides these itself: {', '.join(ours)}")
    return sorted(set(names))


def _is_disabled_shim(entry: Path) -> bool:
    try:
        return entry.read_text() == disabled_shim(entry.name)
    except (OSError, UnicodeDecodeError):
        return False


def check_worker_bin(directory: str | os.PathLike) -> None:
    """Refuse a directory with files amux does not write (a left-over `.partial` of an
    interrupted write is amux's own)."""
    for entry in sorted(Path(directory).iterdir()):
        name = entry.name
        plain = entry.is_file() and not entry.is_symlink()
        if plain and (name in MANAGED or _is_disabled_shim(entry)):
            continue
        if name.startswith(".") and name.endswith(".partial"):
            continue
        raise WorkerSetupError(
            f"unknown file in the worker's command directory: {entry} (remove it)")


def install_worker_bin(directory: str | os.PathLike, python: str | None = None,
                       disabled: list[str] | tuple[str, ...] = ()) -> Path:
    """Write the `amux` command (a stdlib-only Python script), the git/gh/lark-cli shims
    and one failing shim per `disabled` command into `directory` and return the `amux`
    path. Idempotent: each file is replaced atomically, and the shim of a command no longer
    disabled is removed. Raises WorkerSetupError when the directory holds a file amux did
    not write, ValueError for a disabled name that is not a plain command or is amux's own.
    The shim runs with the worker's `python3` (`#!/usr/bin/env python3`) unless `python`
    names an interpreter."""
    disabled = check_disabled(disabled)
    target_dir = Path(directory)
    target_dir.mkdir(parents=True, exist_ok=True)
    check_worker_bin(target_dir)
    source = CLI_SOURCE.read_bytes()
    if python:
        _first, _, rest = source.partition(b"\n")
        source = f"#!{python}".encode() + b"\n" + rest
    target = target_dir / "amux"
    _write(target, source)
    for name, text in SHIMS.items():
        _write(target_dir / name, text.encode())
    for name in disabled:
        _write(target_dir / name, disabled_shim(name).encode())
    for entry in target_dir.iterdir():
        if entry.name not in disabled and _is_disabled_shim(entry):
            entry.unlink(missing_ok=True)  # a command the operator enabled again
    return target


def install_session_bin(directory: str | os.PathLike) -> Path:
    """Write the `amux` command alone into ``directory`` (a session's, not a worker's: no
    shims) and return its path; a file amux did not write there fails (WorkerSetupError)."""
    target_dir = Path(directory)
    target_dir.mkdir(parents=True, exist_ok=True)
    foreign = sorted(p.name for p in target_dir.iterdir()
                     if p.name != "amux" and not p.name.startswith(".amux.partial"))
    if foreign:
        raise WorkerSetupError(f"{target_dir} holds files amux did not write: "
                               f"{', '.join(foreign)}")
    target = target_dir / "amux"
    _write(target, CLI_SOURCE.read_bytes())
    return target


def gitconfig_text(bin_directory: str | os.PathLike, hosts: list[str] | None = None,
                   lfs: bool | None = None) -> str:
    """The worker's global git configuration (it replaces the operator's): a default
    identity (each clone sets the agent's own), amux's credential helper, SSH remotes
    rewritten to HTTPS for every GitHub host amux serves, and LFS when it is installed."""
    helper = Path(bin_directory) / "git-credential-amux"
    lines = [
        "# Written by amux on every dispatch; edits are replaced.",
        "[user]", "\tname = amux", "\temail = amux@users.noreply.github.com",
        "[credential]", "\thelper =", f"\thelper = {helper}", "\tuseHttpPath = true",
        "[init]", "\tdefaultBranch = main",
        "[push]", "\tautoSetupRemote = true",
    ]
    for host in sorted(set(hosts or []) | {"github.com"}):
        lines += [f'[url "https://{host}/"]', f"\tinsteadOf = git@{host}:",
                  f"\tinsteadOf = ssh://git@{host}/"]
    if lfs if lfs is not None else shutil.which("git-lfs"):
        lines += ['[filter "lfs"]', "\tclean = git-lfs clean -- %f",
                  "\tsmudge = git-lfs smudge -- %f", "\tprocess = git-lfs filter-process",
                  "\trequired = true"]
    return "\n".join(lines) + "\n"


def write_gitconfig(path: str | os.PathLike, bin_directory: str | os.PathLike,
                    hosts: list[str] | None = None) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(gitconfig_text(bin_directory, hosts))
    partial.chmod(GITCONFIG_MODE)
    os.replace(partial, target)
    return target


# Never in a worker's environment: the operator's GitHub credentials (seed 002, setup).
REMOVED_ENV = ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")


def worker_env(base_url: str, token: str | None = None, *,
               token_file: str | None = None, gitconfig: str | None = None) -> dict[str, str]:
    """The variables a worker session needs to reach its tools. `base_url` is where amux
    serves, e.g. http://127.0.0.1:8000; the token is given directly or as a file that amux
    rewrites on every dispatch (so a long-lived session follows re-issued tokens).
    `gitconfig` replaces the operator's global and system git configuration."""
    base = base_url.rstrip("/")
    env = {"AMUX_API_URL": f"{base}/api/v1", "AMUX_MCP_URL": f"{base}/mcp"}
    if token:
        env["AMUX_ASSIGNMENT_TOKEN"] = token
    if token_file:
        env["AMUX_ASSIGNMENT_TOKEN_FILE"] = token_file
    if gitconfig:
        env.update({"GIT_CONFIG_GLOBAL": gitconfig, "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_TERMINAL_PROMPT": "0"})
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
