"""The push rule of amux's git gateway and the receive-pack answer it gives (pure)."""

from __future__ import annotations

import pytest

from tickets.core import git_push
from tickets.core.git_push import Command, pkt_line

OWN = "amux/t7-fix-login"
A, B, Z = "a" * 40, "b" * 40, "0" * 40
CAPS = b"report-status side-band-64k quiet object-format=sha1 agent=git/2.43"


def _request(*lines: bytes, caps: bytes = CAPS) -> bytes:
    first, *rest = lines
    return (pkt_line(first + b"\0" + caps + b"\n")
            + b"".join(pkt_line(line + b"\n") for line in rest) + git_push.FLUSH)


def _unpkt(data: bytes) -> list[bytes]:
    """pkt-lines back into their payloads (None for a flush)."""
    out, at = [], 0
    while at < len(data):
        length = int(data[at:at + 4], 16)
        out.append(None if length == 0 else data[at + 4:at + length])
        at += length or 4
    return out


def test_the_command_list_is_read_up_to_its_flush_and_not_before():
    body = _request(f"{Z} {A} refs/heads/{OWN}".encode(), f"{A} {B} refs/heads/main".encode())
    pack = b"PACK\x00\x00\x00\x02"
    for cut in range(len(body)):
        assert git_push.parse_commands(body[:cut]) is None
    request = git_push.parse_commands(body + pack)
    assert request.commands == (Command(Z, A, f"refs/heads/{OWN}"),
                                Command(A, B, "refs/heads/main"))
    assert "side-band-64k" in request.capabilities and "report-status" in request.capabilities
    assert request.size == len(body)


@pytest.mark.parametrize("body", [b"zzzz", b"0003", pkt_line(b"hello world\n") + b"0000",
                                  pkt_line(b"push-cert\0report-status\n") + b"0000"])
def test_what_git_does_not_send_is_malformed(body):
    with pytest.raises(git_push.Malformed):
        git_push.parse_commands(body)


def test_shallow_lines_before_the_commands_are_not_updates():
    body = pkt_line(f"shallow {B}".encode()) + _request(f"{A} {B} refs/heads/{OWN}".encode())
    assert [c.ref for c in git_push.parse_commands(body).commands] == [f"refs/heads/{OWN}"]


def test_the_own_branch_may_be_created_moved_or_forced_but_not_deleted():
    ref = f"refs/heads/{OWN}"
    for old, new in ((Z, A), (A, B), (B, A)):
        assert git_push.refusal(Command(old, new, ref), OWN) is None
    assert "may not delete" in git_push.refusal(Command(A, Z, ref), OWN)


@pytest.mark.parametrize(("ref", "words"), [
    ("refs/heads/main", "may push only its ticket's branch"),
    ("refs/heads/amux/t8-other", "may push only its ticket's branch"),
    (f"refs/heads/{OWN}-2", "may push only its ticket's branch"),
    ("refs/tags/v1", "may not push tags"),
    ("refs/pull/1/head", "may not update refs/pull/1/head"),
])
def test_everything_else_is_refused_with_the_rule(ref, words):
    reason = git_push.refusal(Command(A, B, ref), OWN)
    assert reason.startswith("amux: ") and words in reason and OWN in reason


def test_one_refused_ref_refuses_the_whole_push():
    request = git_push.parse_commands(_request(f"{A} {B} refs/heads/{OWN}".encode(),
                                               f"{A} {B} refs/heads/main".encode()))
    reasons = git_push.refusals(request, OWN)
    assert reasons["refs/heads/main"].startswith("amux: a worker may push only")
    assert "another ref in this push was refused" in reasons[f"refs/heads/{OWN}"]
    only_own = git_push.parse_commands(_request(f"{A} {B} refs/heads/{OWN}".encode()))
    assert git_push.refusals(only_own, OWN) is None
    probe = git_push.parse_commands(git_push.FLUSH)  # git's auth probe before a large push
    assert probe.commands == () and git_push.refusals(probe, OWN) is None


def test_the_report_is_receive_packs_own_in_band_one_when_asked():
    reasons = {"refs/heads/main": "amux: no"}
    plain = git_push.report(reasons, frozenset({"report-status"}))
    assert _unpkt(plain) == [b"unpack ok\n", b"ng refs/heads/main amux: no\n", None]
    banded = _unpkt(git_push.report(reasons, frozenset({"report-status", "side-band-64k"})))
    assert banded[-1] is None and all(p[:1] == b"\x01" for p in banded[:-1])
    assert b"".join(p[1:] for p in banded[:-1]) == plain
    assert git_push.reports_status(frozenset({"report-status-v2"}))
    assert not git_push.reports_status(frozenset({"side-band-64k"}))


def test_a_report_longer_than_one_band_packet_is_split():
    reasons = {f"refs/heads/b{i:04d}": "amux: " + "x" * 200 for i in range(400)}
    caps = frozenset({"report-status", "side-band-64k"})
    packets = _unpkt(git_push.report(reasons, caps))
    assert len(packets) > 2 and all(len(p) <= git_push.LARGE_PACKET_MAX - 4
                                    for p in packets[:-1])
    assert b"".join(p[1:] for p in packets[:-1]) == git_push.report(
        reasons, frozenset({"report-status"}))
