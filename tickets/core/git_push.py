"""Which ref updates a worker's `git push` may make, read from git's receive-pack request,
and git's own answer when some may not (pure: bytes in, bytes out).

A smart-HTTP push is one POST whose body starts with the command list — pkt-lines
`<old> <new> <refname>` (the first carrying the client's capabilities after a NUL), ended
by a flush packet — followed by push options and the pack. The gateway reads only that
list, decides, and either forwards the whole request or answers as receive-pack itself
would: `unpack ok`, then `ng <ref> <reason>` for every ref, so `git push` prints its own
"! [remote rejected] <ref> (<reason>)" line.

The rule: a worker updates its ticket's branch `amux/<short name>` only — created, moved
forward or forced. Everything else is refused: other branches (the default branch,
another ticket's), tags, any other ref, and deleting the ticket's branch (it closes the
ticket's pull request on GitHub and loses the branch a lost work directory is rebuilt
from). A push that names one refused ref is refused whole, so it never half-lands.
"""

from __future__ import annotations

from dataclasses import dataclass

ZERO_ID = "0" * 40
FLUSH = b"0000"
LARGE_PACKET_MAX = 65520  # git's largest pkt-line, its 4 length bytes included
SIDEBAND_DATA = LARGE_PACKET_MAX - 5  # a side-band-64k packet: length, band byte, data


class Malformed(ValueError):
    """Not a receive-pack request git would send."""


@dataclass(frozen=True)
class Command:
    old: str
    new: str
    ref: str

    @property
    def deletes(self) -> bool:
        return set(self.new) == {"0"}


@dataclass(frozen=True)
class Request:
    """A receive-pack request's head: its commands and the capabilities the client asked
    for; `size` is the bytes that held them (flush included)."""

    commands: tuple[Command, ...]
    capabilities: frozenset[str]
    size: int


def pkt_line(data: bytes) -> bytes:
    if len(data) + 4 > LARGE_PACKET_MAX:
        raise ValueError("pkt-line too long")
    return b"%04x" % (len(data) + 4) + data


def parse_commands(buffer: bytes) -> Request | None:
    """The command list at the start of `buffer`, or None while its flush has not come
    yet. Raises Malformed for anything git does not send (a signed push included: its
    commands sit inside a certificate this gateway does not take apart)."""
    commands, capabilities, at = [], frozenset(), 0
    while True:
        if len(buffer) < at + 4:
            return None
        try:
            length = int(buffer[at:at + 4], 16)
        except ValueError:
            raise Malformed("not a pkt-line") from None
        if length == 0:
            return Request(tuple(commands), capabilities, at + 4)
        if length < 5 or length > LARGE_PACKET_MAX:
            raise Malformed("bad pkt-line length")
        if len(buffer) < at + length:
            return None
        line = buffer[at + 4:at + length]
        at += length
        if line.startswith(b"shallow "):
            continue  # a shallow clone's boundary: not an update
        if line.startswith(b"push-cert"):
            raise Malformed("signed pushes are not taken")
        text, nul, caps = line.rstrip(b"\n").partition(b"\0")
        if nul and not commands:
            capabilities = frozenset(caps.decode("ascii", "replace").split())
        parts = text.decode("utf-8", "replace").split(" ")
        if len(parts) != 3 or not all(_is_id(p) for p in parts[:2]) or not parts[2]:
            raise Malformed("not an update command")
        commands.append(Command(*parts))


def _is_id(value: str) -> bool:
    return len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value)


def refusal(command: Command, own_branch: str) -> str | None:
    """Why `command` may not be pushed by the worker of the ticket whose branch is
    `own_branch` (`amux/<short name>`), or None when it may."""
    own_ref = f"refs/heads/{own_branch}"
    if command.ref == own_ref:
        if command.deletes:
            return f"amux: a worker may not delete its ticket's branch {own_branch}"
        return None
    if command.ref.startswith("refs/tags/"):
        return f"amux: a worker may not push tags; it pushes only its branch {own_branch}"
    if command.ref.startswith("refs/heads/"):
        return f"amux: a worker may push only its ticket's branch {own_branch}"
    return f"amux: a worker may not update {command.ref}; it pushes only {own_branch}"


def refusals(request: Request, own_branch: str) -> dict[str, str] | None:
    """The reason for every ref of a push that is refused, or None when all of it may
    land. One refused ref refuses all of them (the others are named as held back)."""
    reasons = {c.ref: refusal(c, own_branch) for c in request.commands}
    if not any(reasons.values()):
        return None
    return {ref: reason or "amux: not pushed, another ref in this push was refused"
            for ref, reason in reasons.items()}


def reports_status(capabilities: frozenset[str]) -> bool:
    """Whether the client asked for a report-status (every git since 1.6 does): without
    one a refusal can only be an HTTP error."""
    return bool({"report-status", "report-status-v2"} & capabilities)


def report(reasons: dict[str, str], capabilities: frozenset[str]) -> bytes:
    """receive-pack's report-status for a push refused whole: nothing unpacked wrongly
    (the pack was never used), every ref `ng`; inside band 1 when the client asked for
    side-band(-64k), as receive-pack sends it, with the flush that ends the bands."""
    status = [pkt_line(b"unpack ok\n")]
    status += [pkt_line(f"ng {ref} {reason}\n".encode()) for ref, reason in reasons.items()]
    status.append(FLUSH)
    body = b"".join(status)
    if "side-band-64k" in capabilities:
        size = SIDEBAND_DATA
    elif "side-band" in capabilities:
        size = 995  # side-band's packets are at most 1000 bytes
    else:
        return body
    return b"".join(pkt_line(b"\x01" + body[i:i + size])
                    for i in range(0, len(body), size)) + FLUSH
