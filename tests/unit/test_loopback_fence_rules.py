"""The fence's rules as iptables-restore lines: a new uid gets its chain whole, a uid in
place gets only the ports it lacks, and a fence in place is left alone (its text is
iptables-save's, which is how a rule in place is found)."""

from runtimes import loopback_fence as fence

EMPTY = """*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
"""


def test_a_new_uid_gets_its_chain_the_jumps_and_its_ports():
    lines = fence.missing(EMPTY, 1234, (8000, 9000), "icmp-port-unreachable")
    assert lines == [
        ":AMUX-FENCE - [0:0]",
        ":AMUXF-1234 - [0:0]",
        "-A AMUXF-1234 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        "-A AMUXF-1234 -p udp -m udp --dport 53 -j ACCEPT",
        "-A AMUXF-1234 -p tcp -m tcp --dport 53 -j ACCEPT",
        "-A AMUXF-1234 -j REJECT --reject-with icmp-port-unreachable",
        "-I AMUXF-1234 1 -p tcp -m tcp --dport 8000 -j ACCEPT",
        "-I AMUXF-1234 1 -p tcp -m tcp --dport 9000 -j ACCEPT",
        "-A AMUX-FENCE -m owner --uid-owner 1234 -j AMUXF-1234",
        "-I OUTPUT 1 -m addrtype --dst-type LOCAL -j AMUX-FENCE",
    ]


def _applied(saved: str, lines: list[str]) -> str:
    """What iptables-save prints after those lines (enough of it for ``missing``)."""
    out = saved.replace("COMMIT\n", "")
    for line in lines:
        if line.startswith("-I "):
            words = line.split()
            del words[2]  # the position
            line = "-A " + " ".join(words[1:])
        out += line + "\n"
    return out + "COMMIT\n"


def test_a_fence_in_place_is_left_alone_and_a_new_port_is_added_ahead_of_the_reject():
    reject = "icmp6-port-unreachable"
    saved = _applied(EMPTY, fence.missing(EMPTY, 7, (8000,), reject))
    assert fence.missing(saved, 7, (8000,), reject) == []
    assert fence.missing(saved, 7, (8000, 8443), reject) == [
        "-I AMUXF-7 1 -p tcp -m tcp --dport 8443 -j ACCEPT"]
    # another uid: its own chain and jump, the shared chain and entry untouched
    other = fence.missing(saved, 8, (8000,), reject)
    assert ":AMUX-FENCE - [0:0]" not in other and ":AMUXF-8 - [0:0]" in other
    assert not any(line.startswith("-I OUTPUT") for line in other)
    assert not any("AMUXF-7" in line for line in other)


def test_off_does_nothing():
    assert "off" in fence.ensure(1234, (8000,), fence.OFF)


def test_where_the_fence_cannot_be_set_up_auto_says_why_and_on_refuses_the_launch(
        monkeypatch):
    import pytest

    from runtimes import errors

    monkeypatch.setattr(fence, "problem", lambda: "iptables-save failed: Permission denied")
    monkeypatch.setattr(fence, "_done", set())
    assert fence.ensure(4321, (8000,), fence.AUTO) == "iptables-save failed: Permission denied"
    with pytest.raises(errors.RuntimeStartFailed, match="loopback fence cannot be set up: "
                       "iptables-save failed: Permission denied"):
        fence.ensure(4321, (8000,), fence.ON)
