"""The ``bwrap`` isolation backend: a namespace sandbox (Debian's bubblewrap) around the
runtime, run as the linux-dac runtime user.

bwrap is started by amux as the unprivileged runtime user (set before exec, exactly as
linux-dac starts the runtime) and makes new user, mount, pid, ipc, uts, cgroup and network
namespaces (``--unshare-all --unshare-user``): no capability survives (``--cap-drop ALL``),
no nested user namespace can be made (``--disable-userns``), bwrap sets ``no_new_privs``
(a setuid binary such as ``su`` or ``sudo`` gains nothing), the child gets a new session
(``--new-session``: no TIOCSTI on amux's terminal) and dies with amux
(``--die-with-parent``).

The file system is an empty root with only: the system directories read-only, the runtime
install read-only, the session's work and state directories read-write, the few read-only
things a session is handed (``Sandbox.read_only``: a worker's commands, gitconfig, the
mirror its clone borrows objects from, its own token file), a private ``/tmp``, a private
``/proc`` (its own pid namespace: amux's processes are not there) and a minimal ``/dev``.
amux's data directory appears only as the empty directories on the way to those paths.

The network namespace has only a loopback interface. Each port of ``Sandbox.ports`` (amux's
own HTTP port, and a provider on this host) is relayed: inside, a small stdlib-Python
listener on ``127.0.0.1:<port>`` (``INNER_RELAY``, started before the runtime is exec'd)
forwards every connection over a Unix socket in the session's state directory to
``Relay``, which runs in amux's event loop and connects to ``127.0.0.1:<port>`` outside.
Nothing else on the host's loopback (PostgreSQL, Redis, any other port) or beyond is
reachable. A port below 1024 cannot be relayed (binding it needs a capability the sandbox
does not have): it stays closed, and the relay says so on the runtime's stderr.

Pure: no Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from . import errors

BWRAP = "bwrap"
SEARCH_PATH = "/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin"
# the system, read-only (a missing one is skipped; a symbolic link, as /bin is on a
# merged-/usr system, is recreated as the same link)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# where the inner relay's Python comes from (the system's, inside the sandbox)
INNER_PYTHON = ("/usr/bin/python3",)
# every namespace (user, mount, pid, network, ipc, uts, cgroup), no capability, no nested
# user namespace (bubblewrap 0.8 or later), a new session, gone with amux
NAMESPACE_FLAGS = ("--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
                   "--disable-userns", "--cap-drop", "ALL")
RELAY_DIR = "relay"  # under the state directory: one Unix socket per relayed port
# where the sandbox sees that directory: a Unix socket's path is at most 107 bytes, which
# a data directory deep in a checkout passes (amux binds its side through /proc/self/fd)
INNER_RELAY_DIR = "/run/amux-relay"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

# Runs inside the sandbox before the runtime: one listener per port on 127.0.0.1, bound
# before the fork (so the runtime never races it), served by a forked child with a thread
# per connection; the parent then execs the runtime (bwrap's own child: when it exits the
# pid namespace and the relay go with it). argv: N, then N (port, socket) pairs, then
# the runtime's command line.
INNER_RELAY = r"""
import os, socket, sys, threading
n = int(sys.argv[1]); pairs = sys.argv[2:2 + 2 * n]; argv = sys.argv[2 + 2 * n:]
listeners = []
for i in range(n):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(pairs[2 * i]))); s.listen(128)
    except OSError as exc:  # a port below 1024 needs a capability the sandbox lacks
        print(f"amux relay: 127.0.0.1:{pairs[2 * i]} not relayed: {exc}", file=sys.stderr)
        s.close(); continue
    listeners.append((s, pairs[2 * i + 1]))
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((b, socket.SHUT_WR), (a, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass
def serve(conn, path):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    up = socket.socket(socket.AF_UNIX)
    try:
        up.connect(path)
    except OSError:
        conn.close(); up.close(); return
    t = threading.Thread(target=pipe, args=(up, conn), daemon=True); t.start()
    pipe(conn, up); t.join(); conn.close(); up.close()
def accept(s, path):
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, path), daemon=True).start()
if listeners and os.fork() == 0:
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    for s, path in listeners[1:]:
        threading.Thread(target=accept, args=(s, path), daemon=True).start()
    accept(*listeners[0])
for s, _ in listeners:
    s.close()
os.execvp(argv[0], argv)
"""


def bwrap_path() -> str | None:
    return shutil.which(BWRAP, path=SEARCH_PATH)


def inner_python() -> str | None:
    return next((p for p in INNER_PYTHON if os.access(p, os.X_OK)), None)


def url_port(url: str) -> int | None:
    """The TCP port of an http(s) URL (its scheme's default when it names none)."""
    try:
        parts = urlsplit(url)
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


def is_loopback(url: str) -> bool:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def relayed_ports(amux_url: str | None, provider_url: str | None,
                  mcp_urls: Iterable[str] = ()) -> tuple[int, ...]:
    """The one place that says which loopback ports a bwrap session reaches: amux's own
    (API, MCP, the git gateway and the model gateway, through which amux-launched runtimes
    reach their provider), a provider URL on this host when a runtime is not configured
    through the model gateway, and an MCP server an operator configured on this host.
    Nothing else."""
    urls = [amux_url, *(u for u in (provider_url, *mcp_urls) if u and is_loopback(u))]
    ports: list[int] = []
    for url in urls:
        port = url_port(url) if url else None
        if port and port not in ports:
            ports.append(port)
    return tuple(ports)


def unreachable_provider(provider_url: str | None) -> str | None:
    """Why the model provider cannot be reached from a bwrap sandbox, or None."""
    if not provider_url or is_loopback(provider_url):
        return None
    return (f"bwrap: the model provider {provider_url} is not on this host, and a bwrap "
            "session's network reaches only amux's own port (where the model gateway "
            "serves providers); set AMUX_ISOLATION=linux-dac to run this session without "
            "the network sandbox")


@dataclass(frozen=True)
class Sandbox:
    """What one bwrap session sees. Paths are absolute; ``read_only`` entries that do not
    exist are left out (a session without a mirror, a worker-less session)."""

    workdir: Path
    state_dir: Path
    runtimes_dir: Path | None = None
    read_only: tuple[Path, ...] = ()
    ports: tuple[int, ...] = ()
    system_dirs: tuple[str, ...] = SYSTEM_DIRS

    def relay_dir(self) -> Path:
        return self.state_dir / RELAY_DIR

    def relay_socket(self, port: int) -> Path:
        return self.relay_dir() / f"{port}.sock"

    def inner_socket(self, port: int) -> str:
        return f"{INNER_RELAY_DIR}/{port}.sock"


def _system_mounts(dirs: Iterable[str]) -> list[str]:
    out: list[str] = []
    for name in dirs:
        if os.path.islink(name):
            out += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            out += ["--ro-bind", name, name]
    return out


def _bind(flag: str, path: Path) -> list[str]:
    """Bind ``path`` at its own name and, when it is reached through a symbolic link, the
    target at its real name too (node resolves its modules' real paths)."""
    real = Path(os.path.realpath(path))
    out = [flag, str(real), str(path)]
    if real != Path(path):
        out += [flag, str(real), str(real)]
    return out


def command(sandbox: Sandbox, argv: list[str], *, bwrap: str | None = None,
            python: str | None = None) -> list[str]:
    """The command line that runs ``argv`` in ``sandbox`` (working directory: the work
    directory). Raises RuntimeStartFailed when bwrap (or, with relayed ports, the system
    Python the inner relay needs) is missing."""
    bwrap = bwrap or bwrap_path()
    if bwrap is None:
        raise errors.RuntimeStartFailed(
            "bwrap: bubblewrap is not installed (run `make sandbox` as root, or set "
            "AMUX_ISOLATION=linux-dac)")
    out = [bwrap, *NAMESPACE_FLAGS, "--hostname", "amux-session",
           *_system_mounts(sandbox.system_dirs),
           "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    if sandbox.runtimes_dir is not None:
        out += _bind("--ro-bind", Path(sandbox.runtimes_dir))
    for path in sandbox.read_only:
        if os.path.lexists(path):
            out += _bind("--ro-bind", Path(path))
    out += _bind("--bind", sandbox.state_dir)
    out += _bind("--bind", sandbox.workdir)
    if sandbox.ports:
        out += ["--bind", str(sandbox.relay_dir()), INNER_RELAY_DIR]
    # the root itself (the directories bwrap made on the way to the binds) read-only
    out += ["--remount-ro", "/", "--chdir", str(sandbox.workdir), "--"]
    if sandbox.ports:
        python = python or inner_python()
        if python is None:
            raise errors.RuntimeStartFailed(
                "bwrap: the system Python (/usr/bin/python3) the sandbox's network relay "
                "runs on is missing (run `make sandbox` as root)")
        pairs = [str(x) for port in sandbox.ports
                 for x in (port, sandbox.inner_socket(port))]
        out += [python, "-I", "-S", "-c", INNER_RELAY, str(len(sandbox.ports)), *pairs]
    return out + list(argv)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


@dataclass
class Relay:
    """amux's side of the relays: a Unix socket per port in the session's state directory
    (owned by the runtime user, 0600) whose connections go to 127.0.0.1:<port>."""

    sandbox: Sandbox
    owner: tuple[int, int] | None = None
    servers: list[asyncio.AbstractServer] = field(default_factory=list)
    folder_fd: int | None = None

    def ensure_folder(self) -> Path | None:
        """The relay's folder, made when missing (bwrap binds it into every sandbox of the
        session, also a check's that runs while no runtime relays)."""
        if not self.sandbox.ports:
            return None
        folder = self.sandbox.relay_dir()
        if not folder.is_dir():
            folder.mkdir(mode=0o700, exist_ok=True)
            if self.owner is not None:
                os.chown(folder, *self.owner)
        return folder

    async def start(self) -> None:
        if self.servers or not self.sandbox.ports:
            return
        folder = self.ensure_folder()
        # bound through the directory's descriptor: a short path whatever the folder's
        self.folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for port in self.sandbox.ports:
            path = self.sandbox.relay_socket(port)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             port: int = port) -> None:
                try:
                    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    writer.close()
                    return
                try:
                    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
                finally:
                    for w in (writer, up_writer):
                        with contextlib.suppress(Exception):
                            w.close()

            server = await asyncio.start_unix_server(
                handle, path=f"/proc/self/fd/{self.folder_fd}/{path.name}")
            self.servers.append(server)
            os.chmod(path, 0o600)
            if self.owner is not None:
                os.chown(path, *self.owner)

    def close(self) -> None:
        for server in self.servers:
            server.close()
        self.servers.clear()
        if self.folder_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.folder_fd)
            self.folder_fd = None


# --------------------------------------------------------------------------- the probe
_probe_cache: dict[tuple[int, int], str | None] = {}


def probe(uid: int, gid: int, refresh: bool = False) -> str | None:
    """Why a bwrap sandbox cannot start here as ``uid``/``gid`` (None: it can). Runs bwrap
    once with the backend's own flags (cached per identity for the process)."""
    key = (uid, gid)
    if key in _probe_cache and not refresh:
        return _probe_cache[key]
    _probe_cache[key] = reason = _run_probe(uid, gid)
    return reason


def _run_probe(uid: int, gid: int) -> str | None:
    found = bwrap_path()
    if found is None:
        return "bubblewrap is not installed (`make sandbox` installs it)"
    if inner_python() is None:
        return "the system Python (/usr/bin/python3) the network relay runs on is missing"
    argv = [found, *NAMESPACE_FLAGS, *_system_mounts(SYSTEM_DIRS), "--proc", "/proc",
            "--dev", "/dev", "--tmpfs", "/tmp", "--", "/bin/true"]
    kwargs: dict = {}
    if os.geteuid() == 0 and uid != 0:
        kwargs = {"user": uid, "group": gid, "extra_groups": []}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL, cwd="/", env={"PATH": SEARCH_PATH},
                              **kwargs)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap did not run: {exc}"
    if done.returncode != 0:
        return f"bwrap failed: {(done.stderr or done.stdout).strip()[:300]}"
    return None
