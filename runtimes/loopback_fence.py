"""linux-dac's loopback fence: what a session's runtime user may reach of this host's own
addresses. Under bwrap the runtime has a network of its own; under linux-dac it shares the
host's, where PostgreSQL, Redis and every other local service listen. The fence lets the
runtime's uid open connections to a local address only on the ports it was launched with
(``sandbox.relayed_ports``: amux's own — API, MCP and both gateways — and an endpoint a
session is configured with on this host) and to DNS; every other local port answers
"connection refused". Other hosts stay reachable, as linux-dac promises no more.

How: netfilter's owner match (``iptables`` and ``ip6tables``; it needs root with
CAP_NET_ADMIN in the host's network namespace, which a default Docker container lacks). A
chain ``AMUX-FENCE``, entered from OUTPUT for packets to any local address (``addrtype
LOCAL``: the host's other addresses too, not only 127.0.0.1), sends each runtime uid to a
chain of its own, ``AMUXF-<uid>``: replies on connections others opened to the runtime
(an app it serves) pass, then DNS and the allowed ports, then REJECT. A launch adds the
ports it needs; nothing is taken out while the uid may run (two launches of one user never
close each other's ports) until the identity is released (``reset``). Each change is one
``iptables-save`` and one ``iptables-restore --noflush`` per family, under a file lock.

Limits: Unix sockets are not network traffic (a local service's socket file is guarded by
its own permissions: PostgreSQL's is usually open to all local users); a runtime cannot
reach a server it starts itself on the loopback (bwrap's private loopback can).

Pure: no Django.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from . import errors

AUTO, ON, OFF = "auto", "on", "off"
MODES = (AUTO, ON, OFF)
BASE_CHAIN = "AMUX-FENCE"
FAMILIES = (("iptables-save", "iptables-restore", "icmp-port-unreachable"),
            ("ip6tables-save", "ip6tables-restore", "icmp6-port-unreachable"))
SEARCH_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"
LOCK_DIRS = (Path("/run"), Path("/tmp"))  # noqa: S108 (the first that exists)
_done: set[tuple[int, int]] = set()  # (uid, port) this process has seen in place
_usable = False  # problem() found nothing once in this process


def chain(uid: int) -> str:
    return f"AMUXF-{uid}"


def _port_rule(uid: int, port: int) -> str:
    # as iptables-save prints it, so a rule in place is found by its text
    return f"-A {chain(uid)} -p tcp -m tcp --dport {port} -j ACCEPT"


def _jump(uid: int) -> str:
    return f"-A {BASE_CHAIN} -m owner --uid-owner {uid} -j {chain(uid)}"


ENTRY = f"-A OUTPUT -m addrtype --dst-type LOCAL -j {BASE_CHAIN}"
ENTRY_FIRST = f"-I OUTPUT 1 -m addrtype --dst-type LOCAL -j {BASE_CHAIN}"


def _chain_body(uid: int, reject: str) -> list[str]:
    name = chain(uid)
    return [f"-A {name} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
            f"-A {name} -p udp -m udp --dport 53 -j ACCEPT",
            f"-A {name} -p tcp -m tcp --dport 53 -j ACCEPT",
            f"-A {name} -j REJECT --reject-with {reject}"]


def missing(saved: str, uid: int, ports: Iterable[int], reject: str) -> list[str]:
    """The ``iptables-restore --noflush`` lines that bring ``saved`` (the filter table as
    ``iptables-save`` prints it) to a fence for ``uid`` open on ``ports``; [] when it is
    there already."""
    lines = {line.strip() for line in saved.splitlines()}
    chains = {line[1:].split()[0] for line in lines if line.startswith(":") and len(line) > 1}
    out: list[str] = []
    if BASE_CHAIN not in chains:
        out.append(f":{BASE_CHAIN} - [0:0]")
    if chain(uid) not in chains:  # declared only when new: declaring flushes a chain
        out += [f":{chain(uid)} - [0:0]", *_chain_body(uid, reject)]
    for port in ports:
        if _port_rule(uid, port) not in lines:
            out.append(f"-I {chain(uid)} 1 -p tcp -m tcp --dport {port} -j ACCEPT")
    if _jump(uid) not in lines:
        out.append(_jump(uid))
    if ENTRY not in lines:
        out.append(ENTRY_FIRST)  # ahead of a host's own rules that accept the loopback
    return out


def problem() -> str | None:
    """Why the fence cannot be set up here, or None."""
    global _usable
    if _usable:
        return None
    if os.geteuid() != 0:
        return "amux does not run as root (the fence's firewall rules need it)"
    for save, restore, _ in FAMILIES:
        if not _which(save) or not _which(restore):
            return (f"{save}/{restore} not found (Debian's iptables package: `make "
                    "sandbox` as root installs it)")
    try:
        for save, _, _ in FAMILIES:
            _run([save, "-t", "filter"])
    except errors.RuntimeStartFailed as exc:
        return str(exc)
    _usable = True
    return None


def ensure(uid: int, ports: Iterable[int], mode: str) -> str | None:
    """The fence for ``uid`` in place, open on ``ports``. None when it is; under ``auto``
    the reason it could not be set up (the launch goes on, and says so); under ``on`` that
    reason raises ``RuntimeStartFailed``; ``off``: nothing is done."""
    if mode == OFF:
        return "the loopback fence is off (AMUX_LOOPBACK_FENCE=off)"
    ports = tuple(sorted(set(ports)))
    if all((uid, port) in _done for port in ports) and (uid, 0) in _done:
        return None
    why = problem()
    if why is None:
        try:
            with _locked():
                for save, restore, reject in FAMILIES:
                    lines = missing(_run([save, "-t", "filter"]), uid, ports, reject)
                    if lines:
                        _run([restore, "--noflush"],
                             "\n".join(["*filter", *lines, "COMMIT", ""]))
        except (errors.RuntimeStartFailed, OSError) as exc:
            why = str(exc)
    if why is None:
        _done.update({(uid, 0), *((uid, port) for port in ports)})
        return None
    if mode == ON:
        raise errors.RuntimeStartFailed(
            f"linux-dac: the loopback fence cannot be set up: {why} (set "
            "AMUX_LOOPBACK_FENCE=auto to run sessions without it, or use AMUX_ISOLATION=bwrap)")
    return why


def reset(uid: int) -> None:
    """Close every port the uid was given (its identity was released): its chain holds
    DNS and REJECT again. Nothing when the uid was never fenced or the fence is absent."""
    _rewrite(uid, lambda _saved, reject: [f":{chain(uid)} - [0:0]",
                                          *_chain_body(uid, reject)])


def forget(uid: int) -> None:
    """Remove the uid's fence altogether (its chain and the jump to it): its user was just
    made, or is gone. A uid the system hands to a new user must not keep the rules of the
    user that had it before: an unfenced launch (an app-server amux spawns) would meet that
    user's REJECT."""
    def removal(saved: str, _reject: str) -> list[str]:
        jumps = _jump(uid) in {line.strip() for line in saved.splitlines()}
        return [*([f"-D {_jump(uid)[3:]}"] if jumps else []), f"-F {chain(uid)}",
                f"-X {chain(uid)}"]

    _rewrite(uid, removal)


def _rewrite(uid: int, lines: Callable[[str, str], list[str]]) -> None:
    """In each family where the uid has a chain: ``lines(saved rules, reject target)``
    applied to the filter table in one restore, under the fence's lock. This process
    forgets what it had seen in place for the uid, so its next `ensure` looks again."""
    _done.difference_update({key for key in _done if key[0] == uid})
    if problem() is not None:
        return
    with _locked():
        for save, restore, reject in FAMILIES:
            saved = _run([save, "-t", "filter"])
            if f":{chain(uid)} " in saved:
                _run([restore, "--noflush"],
                     "\n".join(["*filter", *lines(saved, reject), "COMMIT", ""]))


def _which(name: str) -> str | None:
    return shutil.which(name, path=SEARCH_PATH)


def _run(argv: list[str], stdin: str | None = None) -> str:
    path = _which(argv[0])
    if path is None:
        raise errors.RuntimeStartFailed(f"{argv[0]} not found")
    done = subprocess.run([path, *argv[1:]], input=stdin, capture_output=True, text=True,
                          timeout=30, check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise errors.RuntimeStartFailed(
            f"{argv[0]} failed: {said[-1] if said else f'exit {done.returncode}'}")
    return done.stdout


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One change at a time among amux's processes (save, then restore what is missing)."""
    directory = next((d for d in LOCK_DIRS if d.is_dir()), Path("/tmp"))  # noqa: S108
    fd = os.open(directory / "amux-loopback-fence.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
