"""Where a session may work: a directory under the data directory's `work/`
(settings.WORK_DIR), never that directory itself, named without `..` and still inside it
once its symbolic links are followed.

Under linux-dac a session's work directory is shared with the runtime user (group
read/write, setgid, walked recursively), so a work directory anywhere would hand that user
whatever a caller names — `/etc`, `/root`, amux's own data directory. One rule for every
way in (the REST API, app-server spawns, whatever calls ``create_session``), and the launch
checks it again (``RuntimeConfig.workdir_roots``) before it re-permissions anything.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from sessions.models import Lifecycle, Session

MAX_LENGTH = 500  # Session.workdir


def roots() -> tuple[Path, ...]:
    return (Path(settings.WORK_DIR).resolve(),)


def problem(workdir: object, field: str = "workdir") -> str | None:
    """Why ``workdir`` may not be a session's work directory, or None."""
    if not isinstance(workdir, str) or not workdir.strip():
        return f"{field} must be an absolute path"
    try:
        workdir.encode()  # stored as text: a lone surrogate would fail there, not here
    except UnicodeEncodeError:
        return f"{field} must be valid Unicode text"
    path = Path(workdir)
    if not path.is_absolute():
        return f"{field} must be an absolute path"
    if ".." in path.parts:
        return f"{field} must not contain '..'"
    try:
        resolved = path.resolve()
        is_file = resolved.exists() and not resolved.is_dir()
    except (OSError, RuntimeError, ValueError) as exc:  # a link loop, a NUL, too long
        return f"{field} cannot be resolved: {getattr(exc, 'strerror', None) or exc}"
    allowed = roots()
    if not any(root in resolved.parents for root in allowed):
        where = " or ".join(str(root) for root in allowed)
        linked = f" (it leads to {resolved})" if resolved != path else ""
        return (f"{field} must be a directory under {where}, the data directory's work/"
                f"{linked}")
    if is_file:
        return f"{field} is not a directory"
    if len(str(resolved)) > MAX_LENGTH:  # stored resolved: a link may have made it longer
        return f"{field} must be at most {MAX_LENGTH} characters once its links are followed"
    holder = held_by(resolved)
    if holder is not None:
        return (f"{field} is session {holder}'s work directory (or inside or around it): "
                "each session works in a directory of its own, open to its runtime user "
                "alone")
    return None


def held_by(path: Path) -> int | None:
    """The session that is not archived whose work directory is ``path``, lies inside it
    or contains it, if any."""
    root = roots()[0]
    around = [str(p) for p in [path, *path.parents] if root in p.parents]
    inside = Session.objects.exclude(lifecycle=Lifecycle.ARCHIVED)
    found = (inside.filter(workdir__in=around).values_list("pk", flat=True).first()
             or inside.filter(workdir__startswith=f"{path}/").values_list("pk", flat=True)
             .first())
    return found


def runtime_root() -> Path:
    """Where the sessions' own state lives (each runtime's HOME, config, transcripts)."""
    return Path(settings.DATA_DIR) / "runtime"


def state_dir(session: Session) -> Path:
    """The session's own, or the one the pre-started runtime it took was started with
    (sessions/warm_pool.py; recorded with its identity), which stays its own."""
    adopted = ((session.snapshot or {}).get("identity") or {}).get("state_dir")
    if adopted and Path(adopted).parent == runtime_root():
        return Path(adopted)
    return runtime_root() / f"session-{session.pk}"
