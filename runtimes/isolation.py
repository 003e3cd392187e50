"""Isolation backends: who the runtime process runs as, and what it can reach.

``private-home``: the runtime runs as amux's own user, with a private HOME (and the config
directories beneath it: ``CODEX_HOME``, ``PI_CODING_AGENT_DIR``, Claude's default
``.claude/`` layout with no inherited ``CLAUDE_CONFIG_DIR``) per session.

``linux-dac``: the same private HOME, but the process runs as a dedicated unprivileged user
(default ``amux-agent``, its own group) set in the child before exec (setgid/setuid, no
supplementary groups, umask 002). The session's state directory (HOME, tmp, generated
configs) is owned by that user, mode 0700: nobody else reads what amux wrote there. The work
directory stays amux's, shared with the runtime through its group (setgid directories,
group read/write). Chosen automatically when amux runs as root, since root cannot be
isolated from anything. ``IS_SANDBOX=1`` (Claude's compatibility marker, it enables no
permission mode) is set only here, after checking the target UID is a separate non-root
UID, and the started process is checked to run as it.

``bwrap``: linux-dac's identity and directories, and the runtime inside a namespace sandbox
(``sandbox``: bubblewrap; what the runtime sees of the file system and the network).
Chosen automatically as root when a probe of bwrap as the runtime user succeeds.

One identity per session: amux leases each session a user of its own from a pool
(``<base>-<n>``, e.g. ``amux-agent-7``: own uid, own group, created on first use) and the
session's work directory joins that user's group alone, so one session cannot enter
another's. What amux shares with every runtime read-only (the worker's commands, its
gitconfig, repository mirrors) goes through the base user's group (``amux-agent``), the
pool users' one supplementary group; what belongs to one session (its assignment token)
is handed to its own group at launch. The lease itself lives in the database
(``sessions.identities``); ``retire`` ends what a released identity left running.

Pure: no Django.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import errors, sandbox
from . import loopback_fence as fence

PRIVATE_HOME = "private-home"
LINUX_DAC = "linux-dac"
BWRAP = "bwrap"
BACKENDS = (PRIVATE_HOME, LINUX_DAC, BWRAP)
# the backends whose runtime runs as the unprivileged runtime user
WITH_PRINCIPAL = (LINUX_DAC, BWRAP)
DEFAULT_USER = "amux-agent"
CHILD_UMASK = 0o002  # the work directory stays group-writable


def auto_backend(euid: int | None = None, user: str = DEFAULT_USER) -> str:
    """The backend amux picks when none is configured: as root, bwrap when a probe of it
    (as the runtime user, cached) succeeds, else linux-dac; private-home otherwise."""
    if (os.geteuid() if euid is None else euid) != 0:
        return PRIVATE_HOME
    return BWRAP if auto_reason(user) is None else LINUX_DAC


def auto_reason(user: str = DEFAULT_USER) -> str | None:
    """Why amux (as root) does not pick bwrap by itself, or None when it does."""
    principal = lookup(user) or lookup("nobody")  # created at the first launch; until
    if principal is None:                           # then any unprivileged uid tells
        return "neither the runtime user nor `nobody` exists to probe bwrap as"
    return sandbox.probe(principal.uid, principal.gid)


@dataclass(frozen=True)
class Principal:
    """The unprivileged user a linux-dac runtime runs as, with the supplementary groups it
    is given (a pool user: the base user's group, through which amux shares read-only
    trees with every runtime; none otherwise)."""

    user: str
    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    def in_group(self, gid: int) -> bool:
        return gid == self.gid or gid in self.groups


def lookup(user: str, shared: str | None = None) -> Principal | None:
    """The user, with ``shared``'s group as its supplementary group when it is a member."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    groups: tuple[int, ...] = ()
    if shared and shared != user:
        with contextlib.suppress(KeyError):
            group = grp.getgrnam(shared)
            if user in group.gr_mem and group.gr_gid != entry.pw_gid:
                groups = (group.gr_gid,)
    return Principal(user, entry.pw_uid, entry.pw_gid, groups)


def pool_user(base: str, slot: int | str) -> str:
    """The name of the pool's ``slot``-th user (system account names are at most 32
    characters; a base name that leaves no room is refused in settings)."""
    return f"{base}-{slot}"


def remove_pool(base: str) -> int:
    """Delete the OS users (and their groups) of the pool ``base`` (``<base>-<n>`` and
    ``<base>-app``), ending whatever still runs as them. For a pool that is done with: a
    test run's or a bench's, never an installation's (system ids are few, about 900, and
    each pool user takes one). Only as root; returns how many users went."""
    if os.geteuid() != 0 or not base or base == DEFAULT_USER:
        return 0
    userdel = shutil.which("userdel", path="/usr/sbin:/usr/bin:/sbin:/bin")
    pkill = shutil.which("pkill", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if userdel is None:
        return 0
    mine = re.compile(rf"{re.escape(base)}-(\d+|app)")
    removed = 0
    for entry in pwd.getpwall():
        if not mine.fullmatch(entry.pw_name):
            continue
        if pkill:  # a runtime a stopped worker left behind keeps its user
            subprocess.run([pkill, "-KILL", "-u", entry.pw_name], capture_output=True,
                           stdin=subprocess.DEVNULL)
            # a killed process is gone only once reaped; userdel refuses a user still running
            deadline = time.monotonic() + 3
            while uid_processes(entry.pw_uid) and time.monotonic() < deadline:
                time.sleep(0.05)
        done = subprocess.run([userdel, entry.pw_name], capture_output=True,
                              stdin=subprocess.DEVNULL)
        if done.returncode == 0:
            removed += 1
            with contextlib.suppress(errors.RuntimeStartFailed, OSError):
                fence.forget(entry.pw_uid)  # the next user given this uid starts unfenced
    return removed


def provision(user: str = DEFAULT_USER) -> Principal:
    """Create the runtime user (system account, own group, no login, no home) if missing.
    Idempotent, and safe when two processes race (the loser finds the winner's user)."""
    found = lookup(user)
    if found is not None:
        return found
    if os.geteuid() != 0:
        raise errors.RuntimeStartFailed(
            f"linux-dac: the runtime user {user!r} does not exist and only root can create it "
            "(run `make runtime-user` as root, or set AMUX_ISOLATION=private-home)")
    useradd = shutil.which("useradd", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if useradd is None:
        raise errors.RuntimeStartFailed("linux-dac: useradd not found; create the runtime "
                                        f"user {user!r} by hand")
    done = subprocess.run([useradd, "--system", "--user-group", "--no-create-home",
                           "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                           user], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    found = lookup(user)
    if found is None:
        raise errors.RuntimeStartFailed(
            f"linux-dac: useradd {user} failed: {(done.stderr or done.stdout).strip()[:300]}")
    return _new_uid(found)


def _new_uid(principal: Principal) -> Principal:
    """A user just made starts with nothing of the uid's former holder: no fence rules."""
    with contextlib.suppress(errors.RuntimeStartFailed, OSError):
        fence.forget(principal.uid)
    return principal


def provision_member(user: str, shared: str) -> Principal:
    """A pool user (own uid and group, member of ``shared``'s group, no login, no home),
    created if missing; an existing user is added to ``shared`` when it is not in it.
    Idempotent and race-safe like ``provision``."""
    base = provision(shared)
    found = lookup(user, shared)
    if found is not None and found.groups:
        return found
    if os.geteuid() != 0:
        raise errors.RuntimeStartFailed(
            f"linux-dac: the session's runtime user {user!r} does not exist (or is not in "
            f"the group {shared!r}) and only root can create it (run `make runtime-user` "
            "as root, or set AMUX_ISOLATION=private-home)")
    new = found is None
    if new:
        tool = shutil.which("useradd", path="/usr/sbin:/usr/bin:/sbin:/bin")
        argv = [tool or "useradd", "--system", "--user-group", "--no-create-home",
                "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                "--groups", shared, user]
    else:
        tool = shutil.which("usermod", path="/usr/sbin:/usr/bin:/sbin:/bin")
        argv = [tool or "usermod", "--append", "--groups", shared, user]
    if tool is None:
        raise errors.RuntimeStartFailed(f"linux-dac: {argv[0]} not found; create the "
                                        f"runtime user {user!r} in group {shared!r} by hand")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    found = lookup(user, shared)
    if found is None or not found.groups:
        raise errors.RuntimeStartFailed(
            f"linux-dac: {' '.join(argv[-3:])} failed: "
            f"{(done.stderr or done.stdout).strip()[:300]}")
    if found.gid == base.gid or found.uid == base.uid:
        raise errors.RuntimeStartFailed(
            f"linux-dac: {user!r} shares its uid or group with {shared!r}; it would "
            "isolate nothing from the other sessions")
    return _new_uid(found) if new else found


def verified_principal(user: str, shared: str | None = None) -> Principal:
    """The runtime user, provisioned if missing (a pool user: as a member of ``shared``),
    refused unless it is a separate non-root UID (and not amux's own, which would isolate
    nothing)."""
    principal = (provision_member(user, shared) if shared and shared != user
                 else provision(user))
    if principal.uid == 0 or principal.gid == 0:
        raise errors.RuntimeStartFailed(f"linux-dac: {user!r} is root (uid/gid 0)")
    if principal.uid == os.geteuid():
        raise errors.RuntimeStartFailed(
            f"linux-dac: {user!r} is amux's own user; it isolates nothing")
    return principal


def process_euid(pid: int) -> int | None:
    """The effective UID of a live process (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[2])
    except OSError:
        return None
    return None


def _searchable(path: Path, principal: Principal) -> Path | None:
    """The first directory on the way to ``path`` that ``principal`` cannot enter."""
    groups = {principal.gid, *principal.groups}
    for directory in [*reversed(path.parents), path]:
        try:
            st = directory.stat()
        except OSError:
            return directory
        if st.st_uid == principal.uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid in groups:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            return directory
    return None


def _may(st: os.stat_result, principal: Principal, bits: int) -> bool:
    """Whether ``principal`` has all of ``bits`` (an ``rwx`` triple, 0o7 scale) on a file
    with this stat, by its owner, group or other class (as the kernel picks it)."""
    if st.st_uid == principal.uid:
        return (st.st_mode >> 6) & bits == bits
    if principal.in_group(st.st_gid):
        return (st.st_mode >> 3) & bits == bits
    return st.st_mode & bits == bits


def runtimes_problem(runtimes_dir: Path, principal: Principal) -> str | None:
    """Why ``principal`` cannot use the runtimes installed under ``runtimes_dir``, or None:
    a directory on the way to it it cannot search (a clone under root's 0700 home), an
    entry in the tree it cannot read (or search, or run when its owner may), or one it
    could change (every session's runtime would run what one session wrote there)."""
    root = Path(runtimes_dir).resolve()
    blocked = _searchable(root.parent, principal)
    if blocked is not None:
        return (f"{blocked} is not searchable by {principal.user!r}, so the runtimes under "
                f"it are out of its reach (chmod o+x {blocked}, or install the runtimes "
                "somewhere it can reach with AMUX_RUNTIMES_DIR)")
    for entry, st in tree_entries(root):
        is_dir = stat.S_ISDIR(st.st_mode)
        need = 0o5 if is_dir or st.st_mode & stat.S_IXUSR else 0o4
        if not _may(st, principal, need):
            return (f"{entry} is not {'readable and searchable' if is_dir else 'readable'}"
                    f" by {principal.user!r} (`amux run` and `make runtimes` open the "
                    f"tree; by hand: chmod -R a+rX {root})")
        if _may(st, principal, 0o2):
            return (f"{entry} is writable by {principal.user!r}: one session could change "
                    f"every session's runtime (chmod -R o-w {root})")
    return None


def tree_entries(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every directory and file of the tree at ``root`` (itself included) with its lstat;
    symbolic links, and entries gone meanwhile, are left out."""
    for base, _dirs, files in os.walk(root):
        for entry in [Path(base), *(Path(base) / name for name in files)]:
            try:
                st = entry.lstat()
            except FileNotFoundError:
                continue
            if not stat.S_ISLNK(st.st_mode):
                yield entry, st


def _require_reachable(path: Path, principal: Principal, what: str) -> None:
    blocked = _searchable(path, principal)
    if blocked is not None:
        raise errors.RuntimeStartFailed(
            f"linux-dac: the runtime user {principal.user!r} cannot reach the {what} {path}: "
            f"{blocked} is not searchable by it (make it searchable, e.g. chmod o+x, or put "
            "AMUX_DATA_DIR somewhere it can reach)")


def require_inside(workdir: Path, roots: tuple[Path, ...]) -> None:
    """The work directory, its symbolic links followed now (one may have been planted
    since the session was made), is strictly below one of ``roots``; refused otherwise,
    before anything is created or re-permissioned."""
    resolved = Path(workdir).resolve()
    if not any(Path(root).resolve() in resolved.parents for root in roots):
        raise errors.RuntimeStartFailed(
            f"the work directory {workdir} is not under {', '.join(map(str, roots))}"
            + (f" (it leads to {resolved})" if resolved != Path(workdir) else "")
            + ": refusing to run a session there or share it with the runtime user")


def hand_over(path: Path, principal: Principal | None) -> None:
    """Give one file or directory amux wrote in the state directory to the runtime user."""
    if principal is None:
        return
    with contextlib.suppress(FileNotFoundError):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            raise errors.RuntimeStartFailed(f"linux-dac: refusing the symbolic link {path}")
        if (st.st_uid, st.st_gid) != (principal.uid, principal.gid):
            os.chown(path, principal.uid, principal.gid, follow_symlinks=False)


def hand_private(path: Path, principal: Principal) -> None:
    """A file amux wrote for one session alone (its assignment token): readable by that
    session's own group and by amux, by nobody else (the pool's other users share only
    the base group). A symbolic link is refused, never followed."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise errors.RuntimeStartFailed(f"linux-dac: refusing {path}: {exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.RuntimeStartFailed(f"linux-dac: {path} is not a regular file")
        if st.st_gid != principal.gid:
            os.chown(f"/proc/self/fd/{fd}", -1, principal.gid)
        if stat.S_IMODE(st.st_mode) != 0o640:
            os.chmod(f"/proc/self/fd/{fd}", 0o640)
    finally:
        os.close(fd)


# Where any user may leave files that outlive its processes; a released identity's are
# removed there, so whoever holds the uid next finds none of them.
SHARED_SCRATCH = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def retire(principal: Principal, private_dirs: tuple[Path, ...] = (),
           scratch: tuple[Path, ...] = SHARED_SCRATCH) -> None:
    """An identity handed back to the pool: every process still running as it is killed
    (a background job the agent left), the directories it owned for its session are
    closed to it (amux's again, 0700: the next holder of the uid cannot enter them, so
    the files inside, still the uid's, stay out of its reach), and what it left in the
    machine's shared scratch directories is removed; the loopback ports its fence was
    opened on are closed."""
    if principal.uid == 0 or principal.uid == os.geteuid():
        return
    for pid in uid_processes(principal.uid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)
    with contextlib.suppress(errors.RuntimeStartFailed, OSError):
        fence.reset(principal.uid)
    for directory in private_dirs:
        with contextlib.suppress(FileNotFoundError):
            if directory.is_symlink():
                continue
            os.chown(directory, os.geteuid(), os.getegid(), follow_symlinks=False)
            os.chmod(directory, 0o700)
    for root in scratch:
        with contextlib.suppress(OSError):
            for entry in os.scandir(root):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != principal.uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)


def uid_processes(uid: int) -> list[int]:
    """The pids of the live processes whose real or effective uid is ``uid``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        real, effective = line.split()[1:3]
                        if uid in (int(real), int(effective)):
                            out.append(int(name))
                        break
        except (OSError, ValueError):
            continue
    return out


def own_state_dir(state_dir: Path, principal: Principal) -> None:
    """Everything under the session's state directory belongs to the runtime user, and the
    directory is 0700: configs and tokens amux wrote there are readable by it alone. A
    symbolic link in amux-written places is refused rather than followed."""
    state_dir.mkdir(parents=True, exist_ok=True)
    if state_dir.is_symlink():
        raise errors.RuntimeStartFailed(f"linux-dac: refusing the symbolic link {state_dir}")
    for root, dirs, files in os.walk(state_dir):
        for name in dirs + files:
            entry = Path(root) / name
            try:  # a file a runtime process left may vanish while we walk
                st = entry.lstat()
                if stat.S_ISLNK(st.st_mode):
                    continue  # the runtime's own links (it made them as itself)
                if (st.st_uid, st.st_gid) != (principal.uid, principal.gid):
                    os.chown(entry, principal.uid, principal.gid, follow_symlinks=False)
            except FileNotFoundError:
                continue
    os.chown(state_dir, principal.uid, principal.gid)
    os.chmod(state_dir, 0o700)


def share_workdir(workdir: Path, principal: Principal) -> None:
    """The work directory (and what is already in it) joins the runtime user's group with
    group read/write; directories get the setgid bit so new entries keep the group.

    The runtime user may rename anything in these group-writable directories, also while
    this runs (a process it left in the background): swapping a file or a directory for a
    symbolic link to `/etc/shadow` or another session's files between our look and our
    change would hand that target to it. So the walk holds directory descriptors
    (os.fwalk, links never followed) and every change goes to the very inode looked at."""
    workdir.mkdir(parents=True, exist_ok=True)
    for _root, _dirs, files, dirfd in os.fwalk(workdir, follow_symlinks=False):
        _share_inode(dirfd, os.fstat(dirfd), principal)
        for name in files:
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    continue
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
            except FileNotFoundError:
                continue
            try:
                if os.path.samestat(os.fstat(fd), st):
                    _share_inode(fd, st, principal)
            finally:
                os.close(fd)


def _share_inode(fd: int, st: os.stat_result, principal: Principal) -> None:
    """Group read/write (and search/run where its owner may, setgid on a directory) for
    the runtime user's group, on the file open as ``fd``. Through /proc/self/fd: fchmod
    does not take the O_PATH descriptor a file is opened with (opening a FIFO or a device
    for reading could block or act)."""
    if st.st_uid == principal.uid:
        return  # the runtime user's own: its umask keeps it group-writable
    mode = stat.S_IMODE(st.st_mode)
    want = mode | stat.S_IRGRP | stat.S_IWGRP
    if stat.S_ISDIR(st.st_mode):
        want |= stat.S_IXGRP | stat.S_ISGID
    elif mode & stat.S_IXUSR:
        want |= stat.S_IXGRP
    path = f"/proc/self/fd/{fd}"
    with contextlib.suppress(FileNotFoundError):
        if st.st_gid != principal.gid:
            os.chown(path, -1, principal.gid)
        if want != mode:
            os.chmod(path, want)


# git refuses a repository owned by another user ("dubious ownership"); the work directory
# is amux's and shared on purpose, so the runtime user's git trusts it (command scope).
def _git_trust(env: dict[str, str], workdir: Path) -> None:
    count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    env[f"GIT_CONFIG_KEY_{count}"] = "safe.directory"
    env[f"GIT_CONFIG_VALUE_{count}"] = "*"
    env["GIT_CONFIG_COUNT"] = str(count + 1)


@dataclass
class Launch:
    """How one runtime process is started under the session's backend."""

    backend: str
    principal: Principal | None = None
    sandbox: sandbox.Sandbox | None = None
    relay: sandbox.Relay | None = None
    # linux-dac: why the runtime user's loopback is not fenced (None: it is, or n/a)
    unfenced: str | None = None

    @classmethod
    def prepare(cls, backend: str, user: str, state_dir: Path, workdir: Path,
                runtimes_dir: Path | None = None,
                workdir_roots: tuple[Path, ...] = (), *,
                read_only: tuple[Path, ...] = (), amux_url: str | None = None,
                provider_url: str | None = None, mcp_urls: tuple[str, ...] = (),
                shared_group: str | None = None,
                private_files: tuple[Path, ...] = (),
                loopback_fence: str = fence.AUTO) -> Launch:
        """``shared_group``: a pool user's supplementary group (the base user's);
        ``private_files``: files amux wrote for this session alone (its assignment token),
        handed to the session's own group. ``read_only`` matters to bwrap only: what the
        sandbox shows besides the system, the runtimes and the session's own directories.
        The URLs say which loopback ports the runtime reaches (``sandbox.relayed_ports``):
        relayed into bwrap's sandbox, the only local ports linux-dac's fence leaves open
        (``fence``, in the mode ``loopback_fence`` names)."""
        if backend not in BACKENDS:
            raise errors.RuntimeStartFailed(
                f"unknown isolation backend {backend!r} (known: {', '.join(BACKENDS)})")
        if workdir_roots:
            require_inside(workdir, workdir_roots)
        if backend == PRIVATE_HOME:
            return cls(backend)
        principal = verified_principal(user, shared_group)
        if backend == BWRAP:
            # what the kernel allows an unprivileged uid does not depend on which one: the
            # base user's probe (cached) stands for every pool user's
            probed = (lookup(shared_group) if shared_group else None) or principal
            why = sandbox.unreachable_provider(provider_url) or \
                sandbox.probe(probed.uid, probed.gid)
            if why is not None:
                raise errors.RuntimeStartFailed(
                    why if why.startswith("bwrap") else f"bwrap: cannot start a sandbox "
                    f"as {principal.user!r}: {why} (run `make sandbox` as root, or set "
                    "AMUX_ISOLATION=linux-dac)")
        _require_reachable(state_dir.parent, principal, "state directory")
        _require_reachable(workdir.parent, principal, "work directory")
        if runtimes_dir is not None:  # it runs the binaries and scripts installed there
            _require_reachable(Path(runtimes_dir).resolve(), principal, "runtimes directory")
        own_state_dir(state_dir, principal)
        share_workdir(workdir, principal)
        for path in private_files:
            hand_private(path, principal)
        ports = sandbox.relayed_ports(amux_url, provider_url, mcp_urls)
        if backend != BWRAP:
            return cls(backend, principal,
                       unfenced=fence.ensure(principal.uid, ports, loopback_fence))
        box = sandbox.Sandbox(workdir=workdir, state_dir=state_dir, runtimes_dir=runtimes_dir,
                              read_only=tuple(read_only), ports=ports)
        return cls(backend, principal, box,
                   sandbox.Relay(box, owner=(principal.uid, principal.gid)))

    def command(self, argv: list[str]) -> list[str]:
        """The command line that starts ``argv`` under the backend."""
        if self.sandbox is None:
            return list(argv)
        return sandbox.command(self.sandbox, argv)

    def prepare_side_command(self) -> None:
        """Ready a command that runs beside the session's runtime (a check), not in place of
        it: bwrap's relay folder exists, and the runtime's relay, when it runs, is left
        alone (a check run while none does reaches no relayed port)."""
        if self.relay is not None:
            self.relay.ensure_folder()

    async def start(self) -> None:
        """What must run beside the process (bwrap: amux's side of the network relay)."""
        if self.relay is not None:
            await self.relay.start()

    def close(self) -> None:
        if self.relay is not None:
            self.relay.close()

    def environment(self, env: dict[str, str], workdir: Path) -> dict[str, str]:
        env = dict(env)
        env.pop("CLAUDE_CONFIG_DIR", None)  # Claude keeps its default layout under HOME
        env.pop("IS_SANDBOX", None)
        if self.principal is not None:
            # checked in ``verified_principal``: a separate non-root UID
            env["IS_SANDBOX"] = "1"
            env["USER"] = env["LOGNAME"] = self.principal.user
            _git_trust(env, workdir)
        return env

    def spawn_kwargs(self) -> dict[str, Any]:
        if self.principal is None:
            return {}
        return {"user": self.principal.uid, "group": self.principal.gid,
                "extra_groups": list(self.principal.groups), "umask": CHILD_UMASK}

    def verify(self, pid: int) -> None:
        """The started process runs as the runtime user (a process already gone is the
        runtime's own exit, reported as such by the adapter)."""
        if self.principal is None:
            return
        euid = process_euid(pid)
        if euid is not None and euid != self.principal.uid:
            raise errors.RuntimeStartFailed(
                f"{self.backend}: the runtime runs as uid {euid}, not {self.principal.uid}")


def describe(backend: str, user: str) -> dict[str, Any]:
    """What doctor and the runtimes API say about the backend."""
    out: dict[str, Any] = {"backend": backend}
    if backend in WITH_PRINCIPAL:
        principal = lookup(user)
        out.update(user=user, user_exists=principal is not None,
                   uid=principal.uid if principal else None)
        with contextlib.suppress(KeyError):
            if principal is not None:
                out["group"] = grp.getgrgid(principal.gid).gr_name
        if backend == BWRAP:
            out["bwrap"] = sandbox.bwrap_path()
            out["sandbox_problem"] = (sandbox.probe(principal.uid, principal.gid)
                                      if principal else "the runtime user does not exist")
    return out
