"""A ticket's working copy: the git work amux does for its workers, in one place.

For a ticket on a GitHub thread, `<data>/work/<short name>` is a clone of the ticket's
repository on the branch `amux/<short name>`, made from the `clone_url` the GitHub API
reports (github.com and GitHub Enterprise alike; test servers may use plain http). Every
repository has one bare mirror under `<data>/mirrors/<host>/<owner>/<name>.git`, fetched
before each new ticket (tickets that start together share one fetch); a ticket's clone
borrows the mirror's objects (`git clone --shared`), so the tenth ticket on a large
repository downloads only what is new.

amux's own git runs with the source's credential given for that one command (an HTTP
header in the command's environment), never written into any config file, and never
inside a directory the worker controls: pushing a worker's branch goes through the mirror
(which only amux writes), so a hook or config planted in the work directory never sees a
token. The worker's own clone has amux's git gateway as its `origin`
(`<AMUX_URL>/gateway/git/<owner>/<name>.git`, tickets/git_gateway.py): its git
authenticates there with the assignment token, and the upstream credential is added by
amux on the way through.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from intake.models import Source
from intake.sources import plugin
from intake.sources.base import ConfigError
from sessions import isolation
from tickets.models import Ticket

log = logging.getLogger(__name__)

GIT_TIMEOUT = 600  # a first mirror of a large repository takes a while
ORIGIN_TTL = 300.0  # seconds a repository's clone_url is trusted before asking again
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# How long the first of several tickets starting together on one repository waits, holding
# the mirror's lock, before it fetches: the others arrive meanwhile and share its fetch.
FETCH_GATHER_SECONDS = 0.2


# Settings with which a repository's own configuration makes git run a program: a worker
# can write them into its clone (and its `include.path` files) for amux's next git command.
# Given on amux's command line they win over every configuration file.
HARDENED = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
            "-c", "core.sshCommand=ssh", "-c", "core.pager=cat", "-c", "core.editor=false",
            "-c", "credential.helper=", "-c", "protocol.ext.allow=never")
# Reading a worker's repository (fetching its branch into the mirror) starts git's
# upload-pack in it, which reads that repository's configuration: hardened the same way.
WORKER_UPLOAD_PACK = " ".join(["git", *HARDENED, "upload-pack"])


class WorkspaceError(RuntimeError):
    """The working copy cannot be made or pushed; the message is safe to show."""


@dataclass(frozen=True)
class Origin:
    """The ticket's repository as its GitHub source's API reports it."""

    source_id: int
    repo: str  # owner/name
    clone_url: str
    default_branch: str


def work_dir(ticket: Ticket) -> Path:
    """The ticket's work directory (its clone, the worker session's cwd)."""
    return Path(settings.WORK_DIR) / ticket.short_name


def amux_url() -> str:
    """Where the worker's tools reach amux (`make run` sets AMUX_URL for its processes)."""
    return settings.AMUX_URL.rstrip("/")


def branch_name(ticket: Ticket) -> str:
    return f"amux/{ticket.short_name}"


def mirrors_root() -> Path:
    """Where the mirrors live; a linux-dac worker reads them (refresh_mirror shares each)."""
    return Path(settings.DATA_DIR) / "mirrors"


def reshare_mirrors() -> None:
    """The mirrors' directory searchable again by a linux-dac worker (refresh_mirror opens
    it; an older amux's start-up pass closed it — the trees below it it never touched)."""
    if mirrors_root().is_dir():
        isolation.open_paths(Path(settings.DATA_DIR), mirrors_root())


def mirror_dir(clone_url: str) -> Path:
    parts = urlsplit(clone_url)
    host = re.sub(r"[^A-Za-z0-9.-]", "_", parts.netloc.rsplit("@", 1)[-1])
    path = parts.path.strip("/").removesuffix(".git")
    safe = "/".join(re.sub(r"[^A-Za-z0-9._-]", "_", p) for p in path.split("/") if p)
    if not host or not safe or ".." in safe.split("/"):
        raise WorkspaceError(f"cannot mirror {clone_url!r}: not a repository URL")
    return mirrors_root() / host / f"{safe}.git"


# --- which repository -----------------------------------------------------------------


def _repo_of_thread(key: str) -> str:
    # `owner/name#12` (issue or PR) or `owner/name@main` (default-branch CI)
    return re.split(r"[#@]", key, maxsplit=1)[0]


def repository_of(ticket: Ticket) -> tuple[Source, str] | None:
    """The GitHub source and `owner/name` a ticket works on, or None (an empty directory).
    A GitHub thread names its repository; a chat source may name a default one (`repo`),
    served by the enabled GitHub source that lists it."""
    source = ticket.thread.source
    if source.kind == "github":
        return source, _repo_of_thread(ticket.thread.key)
    wanted = str((source.config or {}).get("repo") or "").strip().lower()
    if not wanted:
        return None
    for candidate in Source.objects.filter(kind="github", enabled=True).order_by("pk"):
        if wanted in plugin("github", candidate.config, candidate.secrets).repos:
            return candidate, wanted
    raise WorkspaceError(f"no enabled GitHub source lists the repository {wanted}")


_origins: dict[tuple, tuple[float, Origin]] = {}
_origins_lock = threading.Lock()


def origin_for(source: Source, repo: str) -> Origin:
    """clone_url and default branch of `repo`, asked of GitHub once per ORIGIN_TTL."""
    key = (source.pk, repo.lower(), source.updated_at)
    now = time.monotonic()
    with _origins_lock:
        hit = _origins.get(key)
    if hit and now - hit[0] < ORIGIN_TTL:
        return hit[1]
    plug = plugin(source.kind, source.config, source.secrets)
    try:
        info = plug.repository(repo)
    except ConfigError as exc:
        raise WorkspaceError(f"{repo}: {exc}") from exc
    except Exception as exc:  # the API is down or refuses: the dispatch fails, retried later
        raise WorkspaceError(f"GitHub did not describe {repo}: {_reason(exc)}") from exc
    origin = Origin(source.pk, repo, info["clone_url"],
                    info.get("default_branch") or source.config.get("default_branch") or "main")
    with _origins_lock:
        _origins[key] = (now, origin)
    return origin


def _reason(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    return f"HTTP {status}" if status else type(exc).__name__


# --- git as amux ------------------------------------------------------------------------


def gateway_url(repo: str) -> str:
    """The worker's remote for `repo` (owner/name): amux's git gateway."""
    return f"{amux_url()}/gateway/git/{repo}.git"


def upstream_authorization(source: Source, origin: Origin) -> str:
    """The Authorization header value amux's git sends upstream for `origin`'s repository
    (the source's token, or an App token minted for that repository alone)."""
    try:
        username, password = plugin(source.kind, source.config, source.secrets
                                    ).git_credential(origin.repo)
    except ConfigError as exc:
        raise WorkspaceError(f"{origin.repo}: {exc}") from exc
    except Exception as exc:  # minting an App token failed: GitHub down or refusing
        raise WorkspaceError(f"no credential for {origin.repo}: {_reason(exc)}") from exc
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def _auth_env(authorization: str) -> dict[str, str]:
    """The credential for one git command: an Authorization header given through git's
    GIT_CONFIG_COUNT variables, so it lives only in that process's environment."""
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: {authorization}"}


def _git(args: list[str], *, cwd: Path | None = None, auth: dict | None = None) -> str:
    env = {"PATH": os.environ.get("PATH") or SYSTEM_PATH, "HOME": str(settings.DATA_DIR),
           "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
           **(auth or {})}
    try:
        done = subprocess.run(["git", *HARDENED, *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkspaceError(f"git {args[0]} did not finish: {type(exc).__name__}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise WorkspaceError(f"git {args[0]} failed: {tail[0][:300]}")
    return done.stdout


def _credential(source: Source, origin: Origin) -> dict[str, str]:
    return _auth_env(upstream_authorization(source, origin))


@contextlib.contextmanager
def _locked(mirror: Path):
    """One git writer per mirror at a time (fetches into one repository race on refs)."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with open(mirror.with_name(mirror.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fetched_at(mirror: Path) -> float:
    """When the mirror's last successful fetch (or first clone) started, 0 if never."""
    try:
        return float(mirror.with_name(mirror.name + ".fetched").read_text())
    except (OSError, ValueError):
        return 0.0


def _mark_fetched(mirror: Path, started: float) -> None:
    stamp = mirror.with_name(mirror.name + ".fetched")
    partial = stamp.with_name(stamp.name + ".partial")
    partial.write_text(repr(started))
    os.replace(partial, stamp)


def refresh_mirror(source: Source, origin: Origin, asked: float | None = None) -> Path:
    """Create the repository's mirror, or fetch what is new into it.

    Tickets on one repository that start together share one fetch: a fetch that started
    after a caller asked holds everything the repository had when it asked, so a caller
    who waited on the mirror's lock while one ran skips its own; the one that fetches
    first lets the callers right behind it (FETCH_GATHER_SECONDS) arrive. A caller who
    came after a fetch had started fetches again (for all who came meanwhile). ``asked``:
    when the caller's work began (its ticket's start), now by default."""
    asked = time.time() if asked is None else asked
    mirror = mirror_dir(origin.clone_url)
    auth = _credential(source, origin)
    with _locked(mirror):
        # a stamp ahead of the clock (the clock was set back) is not trusted
        fresh = asked <= _fetched_at(mirror) <= time.time()
        if (mirror / "HEAD").exists() and not fresh:
            time.sleep(FETCH_GATHER_SECONDS)  # the lock is held: the others queue on it
            started = time.time()
            _git(["fetch", "--prune", "--tags", "--quiet", "origin"], cwd=mirror, auth=auth)
            _mark_fetched(mirror, started)
        elif not (mirror / "HEAD").exists():
            started = time.time()
            partial = mirror.with_name(mirror.name + ".partial")
            if partial.exists():  # a first clone that died half-way
                shutil.rmtree(partial)
            # Branches and tags only: not GitHub's refs/pull/*, which a --mirror would take.
            _git(["clone", "--quiet", "--bare", origin.clone_url, str(partial)], auth=auth)
            for key, value in (("remote.origin.fetch", "+refs/heads/*:refs/heads/*"),
                               ("gc.pruneExpire", "never"),  # ticket clones borrow objects
                               ("gc.reflogExpireUnreachable", "never")):
                _git(["config", key, value], cwd=partial)
            os.replace(partial, mirror)
            _mark_fetched(mirror, started)
        # a ticket's clone borrows these objects: its linux-dac worker must read them
        isolation.share_tree_read_only(mirror)
    return mirror


def prepare(ticket: Ticket, asked: float | None = None) -> Path:
    """The ticket's work directory, ready for its worker: a clone on `amux/<short name>`
    (reused as it is when the ticket is revived), or an empty directory when the ticket
    has no repository. ``asked``: when its run was started (a mirror fetch that started
    after that is fresh enough for it), now by default; runs started together share one
    fetch even when their clones are made one after another."""
    asked = time.time() if asked is None else min(asked, time.time())
    workdir = work_dir(ticket)
    if (workdir / ".git").exists():
        _point_at_gateway(ticket, workdir)
        return workdir  # revived: its directory and branch, as the worker left them
    found = repository_of(ticket)
    if found is None:
        workdir.mkdir(parents=True, exist_ok=True)
        return workdir
    if workdir.exists() and any(workdir.iterdir()):
        # A ticket from before amux cloned (its files are the worker's): left as it is.
        log.warning("ticket %s: %s holds files but no clone; not cloning over them",
                    ticket.pk, workdir)
        return workdir
    source, repo = found
    origin = origin_for(source, repo)
    mirror = refresh_mirror(source, origin, asked)
    branch = branch_name(ticket)
    # A directory lost with its host is rebuilt from the branch the worker pushed.
    start = branch if _has_branch(mirror, branch) else origin.default_branch
    # Built beside it and moved into place whole: a half-made clone is never "revived".
    partial = workdir.with_name(f".{workdir.name}.partial")
    if partial.exists():
        shutil.rmtree(partial)
    workdir.parent.mkdir(parents=True, exist_ok=True)
    _git(["clone", "--quiet", "--shared", "--no-checkout", *_identity(source), str(mirror),
          str(partial)])
    _git(["remote", "set-url", "origin", gateway_url(repo)], cwd=partial)
    _git(["checkout", "--quiet", "--no-track", "-b", branch, f"origin/{start}"], cwd=partial)
    if workdir.exists():
        workdir.rmdir()  # empty (checked above)
    os.replace(partial, workdir)
    return workdir


def _point_at_gateway(ticket: Ticket, workdir: Path) -> None:
    """A clone made before the git gateway has the upstream as its `origin`, where the
    worker's git no longer gets a credential: it is pointed at the gateway. The worker's
    repository configuration is only read and written as a file (`--file`, run outside
    the directory), so nothing planted in it runs as amux."""
    config = workdir / ".git" / "config"
    found = repository_of(ticket)
    if found is None or (workdir / ".git").is_symlink() or config.is_symlink() or (
            not config.is_file()):
        return
    _source, repo = found
    try:
        current = _git(["config", "--file", str(config), "--get", "remote.origin.url"])
    except WorkspaceError:
        return  # no origin: the worker's choice
    wanted = gateway_url(repo)
    current = current.strip()
    if current == wanted or not re.fullmatch(r"(https?|ssh|git)://\S+|git@\S+", current):
        return  # already there, or a local path of the worker's own: not ours to move
    before = config.stat()
    _git(["config", "--file", str(config), "remote.origin.url", wanted])
    if os.geteuid() == 0:  # git wrote a new file: it stays the (linux-dac) worker's
        os.chown(config, before.st_uid, before.st_gid)
    config.chmod(before.st_mode & 0o7777)
    log.info("ticket %s: origin now amux's git gateway", ticket.pk)


def _has_branch(mirror: Path, branch: str) -> bool:
    """Whether the mirror holds refs/heads/`branch` (loose or packed), without running git."""
    ref = f"refs/heads/{branch}"
    if (mirror / ref).is_file():
        return True
    try:
        packed = (mirror / "packed-refs").read_text()
    except OSError:
        return False
    return any(line.split(" ", 1)[-1] == ref for line in packed.splitlines()
               if not line.startswith(("#", "^")))


def _identity(source: Source) -> list[str]:
    """`git clone` options that set the agent's name on its commits in the new clone: the
    source's handle and GitHub's noreply address for it."""
    handle = str((source.config or {}).get("handle") or "").lstrip("@")
    if not handle:
        return []  # the worker gitconfig's default identity applies
    login = handle.removesuffix("[bot]")
    return ["-c", f"user.name={handle}", "-c", f"user.email={login}@users.noreply.github.com"]


# --- pushing for the worker ---------------------------------------------------------------


def push_if_missing(ticket: Ticket, branch: str) -> bool:
    """Make sure `branch` is on the ticket's remote: when it is not, take it from the
    work directory into the mirror and push it from there. True when amux pushed it."""
    found = repository_of(ticket)
    if found is None:
        raise WorkspaceError("this ticket has no repository to push to")
    source, repo = found
    origin = origin_for(source, repo)
    auth = _credential(source, origin)
    ref = f"refs/heads/{branch}"
    if _git(["ls-remote", "--heads", origin.clone_url, ref], auth=auth).strip():
        return False
    workdir = work_dir(ticket)
    dot_git = workdir / ".git"
    if dot_git.is_symlink() or not dot_git.is_dir():
        # a link or a `gitdir:` file would have amux read (and push) another repository
        raise WorkspaceError(f"{branch} is not on the remote and the work directory holds "
                             "no repository of its own")
    mirror = mirror_dir(origin.clone_url)
    if not (mirror / "HEAD").exists():
        refresh_mirror(source, origin)
    staging = f"refs/amux/push/{ticket.short_name}"
    with _locked(mirror):
        try:
            # Reading the worker's repository runs no hook of it; pushing runs none of ours.
            _git(["fetch", "--quiet", "--no-tags", f"--upload-pack={WORKER_UPLOAD_PACK}",
                  str(workdir), f"+{ref}:{staging}"], cwd=mirror)
        except WorkspaceError as exc:
            raise WorkspaceError(
                f"{branch} is neither on the remote nor in the work directory") from exc
        _git(["push", "--quiet", "--no-verify", origin.clone_url, f"{staging}:{ref}"],
             cwd=mirror, auth=auth)
        _git(["update-ref", "-d", staging], cwd=mirror)
    log.info("pushed %s of ticket %s", branch, ticket.pk)
    return True


def same_repository(clone_url: str, protocol: str, host: str, path: str) -> bool:
    """Whether git's credential request (protocol, host[:port], path) is for `clone_url`."""
    want = urlsplit(clone_url)
    if protocol != want.scheme.lower() or host != want.netloc.rsplit("@", 1)[-1].lower():
        return False
    def norm(p: str) -> str:
        return p.strip("/").removesuffix(".git").lower()
    return norm(path) == norm(want.path)
