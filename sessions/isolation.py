"""Which isolation backend new runtime launches use (the settings' word, or the automatic
choice: linux-dac when amux runs as root) and how doctor describes it. The backends
themselves: ``sessions.runtimes.isolation``."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from django.conf import settings

from sessions.runtimes import isolation


def selected_backend() -> str:
    """``private-home`` or ``linux-dac``: AMUX_ISOLATION when set, else automatic."""
    return settings.AMUX_ISOLATION or isolation.auto_backend()


def runtime_user() -> str:
    return settings.AMUX_RUNTIME_USER


def status() -> dict[str, Any]:
    """The backend new sessions get, and (linux-dac) whether its runtime user exists."""
    return isolation.describe(selected_backend(), runtime_user())


def provision() -> dict[str, Any]:
    """Create the runtime user when the selected backend needs it (idempotent)."""
    if selected_backend() == isolation.LINUX_DAC:
        isolation.provision(runtime_user())
    return status()


def share_with_runtime(path: Path) -> None:
    """A secret amux rewrites while the runtime runs (e.g. a worker's assignment token
    file) readable by the linux-dac runtime user through its group, and by nobody else:
    the file 0640, its directory 0710. Nothing to do under private-home."""
    if selected_backend() != isolation.LINUX_DAC:
        return
    principal = isolation.verified_principal(runtime_user())
    _open_ancestors(path.parent)
    os.chown(path.parent, -1, principal.gid)
    path.parent.chmod(0o710)
    os.chown(path, -1, principal.gid, follow_symlinks=False)
    path.chmod(0o640)


def open_paths(*paths: Path) -> None:
    """amux's own directories on the way to a runtime's state and work directories (the
    data directory, its runtime/ and work/) searchable by the linux-dac runtime user: o+x
    only, never listing or reading. Nothing to do under private-home."""
    if selected_backend() != isolation.LINUX_DAC:
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
    if selected_backend() != isolation.LINUX_DAC:
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
