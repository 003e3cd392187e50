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

An unreachable registry is found in about a second (`npm ping`, no retries), not after
npm's own minute of retries: the install is then tried from npm's cache alone, and failing
that the runtimes already installed stay in use ("stale": pinned by an older lockfile).
`amux run` keeps retrying in the background and installs the new ones beside the running
ones (`.amux-runtimes-next`); the next start swaps them in without asking the registry,
so no runtime's files change under a session that runs.

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
import time
from dataclasses import dataclass
from pathlib import Path

from runtimes.base import default_runtimes_dir

STAMP = ".amux-lock-sha256"
NPM_CI = ("ci", "--no-audit", "--no-fund", "--loglevel=error")
# npm's own network settings (.npmrc, proxy) apply; one try, a few seconds
NPM_PING = ("ping", "--fetch-retries=0", "--fetch-timeout=5000", "--loglevel=error")
PING_TIMEOUT_S = 15
NEXT = ".amux-runtimes-next"  # installed in the background, swapped in at the next start


@dataclass(frozen=True)
class Outcome:
    # "current" | "installed" | "adopted" | "no-lockfile" | "failed" | "stale" (the runtimes
    # of an older lockfile kept: the new ones could not be installed)
    state: str
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


def _registry_problem(project: Path, npm: str) -> str | None:
    """Why the registry npm would fetch from cannot be reached now, or None."""
    try:
        result = subprocess.run([npm, *NPM_PING], cwd=project, capture_output=True,
                                text=True, stdin=subprocess.DEVNULL, timeout=PING_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"npm ping got no answer in {PING_TIMEOUT_S} s"
    except OSError as exc:
        return f"npm ping could not run: {exc}"
    return None if result.returncode == 0 else _reason(result.stderr)[:200]


def _needs_registry(lockfile: Path) -> bool:
    """Whether installing the lockfile fetches anything (a package from a tarball on disk
    or a linked folder does not)."""
    try:
        packages = json.loads(lockfile.read_text()).get("packages") or {}
    except (OSError, ValueError, AttributeError):
        return True
    return any(name and not entry.get("link")
               and not str(entry.get("resolved", "")).startswith("file:")
               for name, entry in packages.items())


def _build(project: Path, npm: str, into: Path, offline: bool = False) -> str | None:
    """`npm ci` in a staging folder; its node_modules, stamped and opened, ends up at
    ``into`` (replaced). Returns why it failed, or None."""
    staging = project / ".amux-runtimes-staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for name in ("package.json", "package-lock.json", ".npmrc"):
            if (project / name).exists():
                shutil.copy2(project / name, staging / name)
        result = subprocess.run([npm, *NPM_CI, *(["--offline"] if offline else [])],
                                cwd=staging, capture_output=True, text=True,
                                stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            return f"npm ci exited {result.returncode}: {_reason(result.stderr)}"[:300]
        built = staging / "node_modules"
        built.mkdir(exist_ok=True)  # a lockfile without packages installs nothing
        (built / STAMP).write_text(lock_hash(project / "package-lock.json") + "\n")
        open_tree(built)  # before the swap: never a moment with closed runtimes in place
        shutil.rmtree(into, ignore_errors=True)
        built.rename(into)
        return None
    except OSError as exc:
        return f"could not install: {exc}"[:300]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap(built: Path, target: Path) -> None:
    """``built`` becomes the runtimes directory; the one before is removed."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.is_symlink():
        target.unlink()
    elif target.exists():
        target.rename(old)
    built.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _npm_ci(project: Path, target: Path, npm: str, offline: bool = False) -> str | None:
    """Install into a staging copy, then swap it in. Returns why it failed, or None."""
    ready = project / NEXT
    failure = _build(project, npm, ready, offline)
    if failure is None:
        try:
            _swap(ready, target)
        except OSError as exc:
            return f"could not install: {exc}"[:300]
    return failure


def _has_runtimes(target: Path) -> bool:
    return target.is_dir() and any(target.iterdir())


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
        ready = project / NEXT
        if _stamp(ready) == wanted:  # installed in the background by the run before
            _swap(ready, target)
            return Outcome("installed", "installed in the background before this start")
        npm = shutil.which("npm")
        if npm is None:
            failure = "npm not found"
        elif (problem := _needs_registry(lockfile) and _registry_problem(project, npm)):
            failure = f"the npm registry cannot be reached ({problem})"
            if _npm_ci(project, target, npm, offline=True) is None:  # npm's cache had them
                return Outcome("installed", "from npm's cache: " + failure)
        else:
            failure = _npm_ci(project, target, npm)
    if failure:
        if _has_runtimes(target):  # the runtimes that were there are the ones amux starts with
            open_tree(target)
            return Outcome("stale", f"{failure}; the runtimes installed before stay in use")
        return Outcome("failed", failure)
    return Outcome("installed")


def status(target: Path | None = None) -> tuple[bool, str]:
    """Whether the runtimes in use are the lockfile's, in words (`amux doctor`); reads
    stamps only, asks no registry."""
    target = Path(target or runtimes_dir())
    lockfile = target.parent / "package-lock.json"
    if not lockfile.exists():
        return True, f"no package-lock.json next to {target}"
    wanted = lock_hash(lockfile)
    if _stamp(target) == wanted or _installed_matches(lockfile, target):
        return True, f"current ({target})"
    if not _has_runtimes(target):
        return False, f"not installed in {target} (`make runtimes`)"
    ready = " (the new ones are installed; `amux restart` uses them)" \
        if _stamp(target.parent / NEXT) == wanted else ""
    return False, f"stale: installed from an older package-lock.json, still in use{ready}"


def install_beside(target: Path | None = None) -> Outcome:
    """For a run whose runtimes are stale: install the lockfile's runtimes beside the ones
    in use (``NEXT``), for the next start to swap in; nothing running is touched. "stale"
    while the registry still cannot be reached."""
    target = Path(target or runtimes_dir())
    project = target.parent
    lockfile = project / "package-lock.json"
    npm = shutil.which("npm")
    if not lockfile.exists() or npm is None:
        return Outcome("failed", "no package-lock.json" if npm else "npm not found")
    wanted = lock_hash(lockfile)
    with open(lockfile, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if wanted in (_stamp(target), _stamp(project / NEXT)):
            return Outcome("current")
        problem = _needs_registry(lockfile) and _registry_problem(project, npm)
        if problem:
            return Outcome("stale", f"the npm registry cannot be reached ({problem})")
        failure = _build(project, npm, project / NEXT)
    return Outcome("failed", failure) if failure else Outcome("installed")


def keep_trying(say, target: Path | None = None, first_s: float = 30.0,
                most_s: float = 900.0) -> Outcome:
    """`amux run`'s background retry while its runtimes are stale: ``install_beside`` after
    30 s, then twice as long each time up to 15 minutes, until the new runtimes are ready
    for the next start (``say`` tells the operator once, then) or are current already."""
    wait = first_s
    while True:
        time.sleep(wait)
        outcome = install_beside(target)
        if outcome.state == "installed":
            say("amux: the agent runtimes of the current package-lock.json are installed "
                "beside the ones in use; `amux restart` starts using them")
            return outcome
        if outcome.state == "current":
            return outcome
        wait = min(wait * 2, most_s)


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
