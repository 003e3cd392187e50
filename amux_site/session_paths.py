"""The start-up permission pass (operations.make_private) with what sessions need from the
data directory, as the apps that create those paths name them.

A linux-dac runtime runs as another user: it passes through the data directory, its
`runtime/` and `work/`, and a worker reads its commands, gitconfig, token and the mirrors
its clone borrows objects from. Each of those is opened by the code that writes it
(sessions.isolation's open_paths and share_*); the pass must not undo that on a restart,
while a session resumed after it relies on them.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from amux_site import operations
from sessions import isolation, services
from tickets import worker, workspace


def shared() -> list[Path]:
    """Left exactly as their creators set them."""
    return [*worker.shared_paths(), workspace.mirrors_root()]


def searched() -> list[Path]:
    """Directories a runtime only passes through: their o+x is kept."""
    return [services.runtime_root(), Path(settings.WORK_DIR)]


def make_private() -> None:
    """Close the data directory but what sessions need; then open what a worker reads
    again where an older amux's pass closed it. Only what exists, and only for a runtime
    user that exists (nothing was shared with one that does not; creating it is the first
    launch's business); the directories every launch passes through are opened by the
    launch itself (services.runtime_config)."""
    operations.make_private(Path(settings.DATA_DIR), shared=shared(), searched=searched())
    if not isolation.status().get("user_exists"):
        return
    worker.reshare()
    workspace.reshare_mirrors()
