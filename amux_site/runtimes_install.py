"""Install the agent runtimes pinned in package-lock.json once, not on every start.

`amux run` calls `ensure()` after it holds the data directory's lock, so a second
`make run` on the same checkout is refused before it touches the runtimes under the one
that runs. The runtimes directory (`node_modules`, or AMUX_RUNTIMES_DIR) keeps a stamp
holding the sha256 of the lockfile it was installed from: while the lockfile is unchanged,
nothing is installed and no registry is contacted.

`npm ci` deletes `node_modules` before it fetches anything, so an unreachable registry
would leave no runtimes at all. It therefore runs in a staging directory beside it, and the
result replaces the runtimes directory only once it succeeded: a failed install leaves the
runtimes that were there, amux starts anyway, and `amux doctor` names what is missing.

amux runs with umask 077, so what npm installs from inside it is 0700/0600; under linux-dac
the runtimes run as another user, who could then execute none of it. Every install, adoption
and start therefore opens the tree to everyone for reading and running (a+rX, like a system
package) and writable by its owner alone: it is the same public code for every session, and
a session that could change it would change the others' runtime.

No Django here: `make runtimes` runs it as `python -m amux_site.runtimes_install`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from runtimes.base import default_runtimes_dir

STAMP = ".amux-lock-sha256"
NPM_CI = ("ci", "--no-audit", "--no-fund", "--loglevel=error")


@dataclass(frozen=True)
class Outcome:
    state: str  # "current" | "installed" | "adopted" | "no-lockfile" | "failed"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state != "failed"


def runtimes_dir() -> Path:
    """Where the runtimes live: AMUX_RUNTIMES_DIR, else this checkout's node_modules."""
    env = os.environ.get("AMUX_RUNTIMES_DIR")
    if env:
        return Path(env)
    return default_runtimes_dir()


def lock_hash(lockfile: Path) -> str:
    return hashlib.sha256(lockfile.read_bytes()).hexdigest()


def _stamp(target: Path) -> str | None:
    try:
        return (target / STAMP).read_text().strip()
    except OSError:
        return None


def _installed_matches(lockfile: Path, target: Path) -> bool:
    """Whether `target` already holds exactly what the lockfile pins.

    npm records what it installed in `node_modules/.package-lock.json`; an install made
    before stamps existed is adopted when every package there is pinned identically and
    every pinned package missing there is optional (another platform's binary)."""
    try:
        pinned = json.loads(lockfile.read_text())["packages"]
        present = json.loads((target / ".package-lock.json").read_text())["packages"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    for name, entry in present.items():
        want = pinned.get(name)
        if want is None or (want.get("version"), want.get("integrity")) != (
                entry.get("version"), entry.get("integrity")):
            return False
    return all(entry.get("optional") for name, entry in pinned.items()
               if name and name not in present)


def open_tree(target: Path) -> None:
    """Everything under `target` readable by everyone, directories and what its owner may
    run also searchable/executable by everyone (a+rX); group/world write and set-id bits
    removed (nothing a runtime user could change, or run as the tree's owner). Symbolic
    links are left alone (what they point to in the tree is opened as itself). amux running
    as a user other than root changes only what that user owns (a shared install owned by
    someone else is theirs to open)."""
    euid = os.geteuid()
    for root, dirs, files in os.walk(target):
        for entry in [root, *(os.path.join(root, name) for name in dirs + files)]:
            try:
                st = os.lstat(entry)
                if stat.S_ISLNK(st.st_mode) or (euid != 0 and st.st_uid != euid):
                    continue
                mode = stat.S_IMODE(st.st_mode)
                if stat.S_ISDIR(st.st_mode):
                    want = mode | 0o555
                else:
                    want = mode | 0o444 | (0o111 if mode & stat.S_IXUSR else 0)
                    want &= ~(stat.S_ISUID | stat.S_ISGID)
                want &= ~(stat.S_IWGRP | stat.S_IWOTH)
                if want != mode:
                    os.chmod(entry, want)
            except OSError:  # gone while we walk (a concurrent swap), or not ours to change
                continue


def _reason(stderr: str) -> str:
    """npm's own sentence about what failed (not its error code lines or log path)."""
    for line in stderr.splitlines():
        text = line.removeprefix("npm error").removeprefix("npm ERR!").strip()
        if text and not text.startswith(("code ", "syscall ", "errno ", "A complete log")):
            return text
    return "no reason given"


def _npm_ci(project: Path, target: Path, npm: str) -> str | None:
    """Install into a staging copy, then swap it in. Returns why it failed, or None."""
    staging = project / ".amux-runtimes-staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for name in ("package.json", "package-lock.json", ".npmrc"):
            if (project / name).exists():
                shutil.copy2(project / name, staging / name)
        result = subprocess.run([npm, *NPM_CI], cwd=staging, capture_output=True,
                                text=True, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            return f"npm ci exited {result.returncode}: {_reason(result.stderr)}"[:300]
        built = staging / "node_modules"
        built.mkdir(exist_ok=True)  # a lockfile without packages installs nothing
        (built / STAMP).write_text(lock_hash(project / "package-lock.json") + "\n")
        open_tree(built)  # before the swap: never a moment with closed runtimes in place
        old = target.with_name(target.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if target.is_symlink():
            target.unlink()
        elif target.exists():
            target.rename(old)
        built.rename(target)
        shutil.rmtree(old, ignore_errors=True)
        return None
    except OSError as exc:
        return f"could not install: {exc}"[:300]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def ensure(target: Path | None = None) -> Outcome:
    """Install the pinned runtimes into `target` unless they are current. Never raises for
    a missing npm or a failed install: the caller starts anyway."""
    target = Path(target or runtimes_dir())
    project = target.parent
    lockfile = project / "package-lock.json"
    if not lockfile.exists():
        return Outcome("no-lockfile", f"no package-lock.json next to {target}")
    wanted = lock_hash(lockfile)
    if _stamp(target) == wanted:
        # an install made under umask 077 before amux opened its trees is opened now
        open_tree(target)
        return Outcome("current")
    # One install per checkout at a time, even from two data directories.
    with open(lockfile, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if _stamp(target) == wanted:
            open_tree(target)
            return Outcome("current")
        if _installed_matches(lockfile, target):
            with contextlib.suppress(OSError):
                (target / STAMP).write_text(wanted + "\n")
            open_tree(target)
            return Outcome("adopted")
        npm = shutil.which("npm")
        failure = _npm_ci(project, target, npm) if npm else "npm not found"
    if failure:
        if target.is_dir():  # the runtimes that were there are the ones amux starts with
            open_tree(target)
        return Outcome("failed", failure)
    return Outcome("installed")


def main() -> int:
    outcome = ensure()
    if outcome.state == "installed":
        print(f"amux: agent runtimes installed into {runtimes_dir()}")
    elif not outcome.ok:
        print(f"amux: agent runtimes not installed: {outcome.detail}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
