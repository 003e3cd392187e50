"""Tests run the runtimes under the backend amux would pick here (linux-dac as root)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from runtimes import isolation

# linux-dac tests switch to the runtime user, which only root can: `make test` as root (as CI
# runs it) covers them; a run as another user leaves the linux-dac backend untested.
as_root = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="switches to the linux-dac runtime user, which needs root: run `make test` as root")


def backend() -> str:
    from django.conf import settings

    return settings.AMUX_ISOLATION or isolation.auto_backend()


def runtime_user() -> str:
    from django.conf import settings

    return settings.AMUX_RUNTIME_USER


def reachable(path: Path) -> Path:
    """pytest makes its temporary directories 0700; a linux-dac runtime user must be able
    to pass through them (search only, no listing) to the directories the test gives it."""
    if backend() not in isolation.WITH_PRINCIPAL:
        return path
    path = Path(path)
    for directory in [path, *path.parents]:
        try:
            st = directory.stat()
        except FileNotFoundError:
            continue
        if st.st_uid == os.geteuid() and not st.st_mode & stat.S_IXOTH:
            directory.chmod(stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
    return path
