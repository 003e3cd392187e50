"""Which isolation backend new runtime launches use (the settings' word, or the automatic
choice: as root bwrap when its probe succeeds, else linux-dac; private-home otherwise), why,
and how doctor describes it; what a bwrap session is shown of amux's data directory. The
backends themselves: ``runtimes.isolation`` and ``runtimes.sandbox``."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from django.conf import settings

from runtimes import isolation
from sessions.identities import principal_of


def selected_backend() -> str:
    """``private-home``, ``linux-dac`` or ``bwrap``: AMUX_ISOLATION when set, else
    automatic."""
    return settings.AMUX_ISOLATION or isolation.auto_backend(user=runtime_user())


def selection_reason() -> str:
    """Why new sessions get the selected backend (doctor, the Sessions page)."""
    if settings.AMUX_ISOLATION:
        return f"AMUX_ISOLATION={settings.AMUX_ISOLATION}"
    if os.geteuid() != 0:
        return "automatic: amux does not run as root, so it cannot switch users"
    why = isolation.auto_reason(runtime_user())
    if why is None:
        return "automatic: amux runs as root and the bwrap probe succeeded"
    return f"automatic: amux runs as root; bwrap is not used here: {why}"


def uses_principal(backend: str | None = None) -> bool:
    """Whether runtimes run as the unprivileged runtime user (linux-dac, bwrap)."""
    return (backend or selected_backend()) in isolation.WITH_PRINCIPAL


def runtime_user() -> str:
    return settings.AMUX_RUNTIME_USER


def status() -> dict[str, Any]:
    """The backend new sessions get and why, and (linux-dac, bwrap) whether its runtime
    user exists (bwrap: whether its probe works)."""
    return {**isolation.describe(selected_backend(), runtime_user()),
            "reason": selection_reason()}


def provision() -> dict[str, Any]:
    """Create the runtime user when the selected backend needs it (idempotent)."""
    if uses_principal():
        isolation.provision(runtime_user())
    return status()


def share_with_session(path: Path, session_id: int | None) -> None:
    """A secret amux wrote for one session (a worker's assignment token): readable by that
    session's own runtime user (its group, 0640) and by nobody else; its directory
    searchable, not listable, by the runtime users (0710 through the shared group). A
    session that holds no identity yet gets the file at its launch
    (``Launch.prepare(private_files=…)``); until then it is amux's alone (0600). Nothing
    to do under private-home."""
    if not uses_principal():
        return
    base = isolation.verified_principal(runtime_user())
    _open_ancestors(path.parent)
    os.chown(path.parent, -1, base.gid)
    path.parent.chmod(0o710)
    held = principal_of(session_id)
    if held is None or held[1] is None:
        if path.exists() and not path.is_symlink():
            os.chown(path, -1, os.getegid(), follow_symlinks=False)
            path.chmod(0o600)
        return
    isolation.hand_private(path, held[1])


def open_paths(*paths: Path) -> None:
    """amux's own directories on the way to a runtime's state and work directories (the
    data directory, its runtime/ and work/) searchable by the linux-dac runtime user: o+x
    only, never listing or reading. Nothing to do under private-home."""
    if not uses_principal():
        return
    for path in paths:
        path.mkdir(parents=True, exist_ok=True)
        st = path.stat()
        if st.st_uid == os.geteuid() and not st.st_mode & 0o001:
            path.chmod((st.st_mode & 0o7777) | 0o001)


def _open_ancestors(path: Path) -> None:
    """The data directory and every directory below it on the way to ``path`` (exclusive)
    searchable by the runtime user (o+x)."""
    data = Path(settings.DATA_DIR).resolve()
    path = path.resolve()
    if path != data and data not in path.parents:
        return
    chain = [p for p in path.parents if p == data or data in p.parents]
    open_paths(*reversed(chain))


def share_tree_read_only(path: Path) -> None:
    """A tree amux keeps for the runtime to read (a worker's command directory, the
    repository mirror a ticket's clone borrows objects from) readable by the linux-dac
    runtime user through its group, never writable. Called again after amux changes the
    tree (amux writes under umask 077). Nothing to do under private-home."""
    if not uses_principal():
        return
    principal = isolation.verified_principal(runtime_user())
    _open_ancestors(path)
    for entry, st in isolation.tree_entries(path):
        if st.st_gid != principal.gid:
            os.chown(entry, -1, principal.gid, follow_symlinks=False)
        mode = stat.S_IMODE(st.st_mode)
        want = mode | stat.S_IRGRP
        if stat.S_ISDIR(st.st_mode) or mode & stat.S_IXUSR:
            want |= stat.S_IXGRP
        if want != mode:
            os.chmod(entry, want)


# What a bwrap session is shown of amux's data directory besides its own work and state
# directories: the worker's tools by the paths its environment names (never a whole
# directory of other tickets' tokens), and the mirror its clone borrows objects from.
SHOWN_ENV = ("GIT_CONFIG_GLOBAL", "AMUX_ASSIGNMENT_TOKEN_FILE")


def sandbox_read_only(workdir: Path, env: dict[str, str], extra_path: list[str]
                      ) -> tuple[Path, ...]:
    """The read-only paths a bwrap session needs from amux's data directory (and any
    other directory on its PATH)."""
    shown = [Path(p) for p in extra_path if p]
    shown += [Path(env[name]) for name in SHOWN_ENV if env.get(name)]
    shown += _alternates(workdir)
    return tuple(dict.fromkeys(p for p in shown if p.is_absolute()))


def _alternates(workdir: Path) -> list[Path]:
    """The object directories a clone borrows from (``objects/info/alternates``)."""
    try:
        text = (workdir / ".git" / "objects" / "info" / "alternates").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and os.path.isabs(line):
            path = Path(line)
            # the mirror repository itself (its HEAD, refs, config), not only its objects
            out.append(path.parent if path.name == "objects" else path)
    return out
