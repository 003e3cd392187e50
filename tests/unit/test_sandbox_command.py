"""The bwrap command line (runtimes/sandbox.py): which namespaces, which mounts,
which ports; pure, nothing runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtimes import errors, isolation, sandbox


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def _box(tmp_path: Path, **kw) -> sandbox.Sandbox:
    for name in ("work", "state", "rt", "bin"):
        (tmp_path / name).mkdir(exist_ok=True)
    return sandbox.Sandbox(workdir=tmp_path / "work", state_dir=tmp_path / "state",
                           runtimes_dir=tmp_path / "rt", **kw)


def test_every_namespace_no_capability_no_nested_user_namespace(tmp_path):
    argv = sandbox.command(_box(tmp_path), ["/bin/true"], bwrap="/usr/bin/bwrap")
    head = argv[:argv.index("--")]
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--new-session",
                 "--die-with-parent"):
        assert flag in head, flag
    assert head[head.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in head  # --unshare-all includes the network
    # private /proc, /dev and /tmp; the root itself read-only once the binds are made
    assert head[head.index("--proc") + 1] == "/proc"
    assert head[head.index("--dev") + 1] == "/dev"
    assert "/tmp" in [head[i + 1] for i, a in enumerate(head) if a == "--tmpfs"]
    assert head[head.index("--remount-ro") + 1] == "/"
    assert head.index("--remount-ro") > max(i for i, a in enumerate(head) if "bind" in a)
    assert argv[-1] == "/bin/true"  # no port: the runtime is bwrap's own child
    assert head[head.index("--chdir") + 1] == str(tmp_path / "work")


def test_mounts_what_the_session_needs_and_nothing_else(tmp_path):
    token = tmp_path / "tokens" / "ticket-1"
    token.parent.mkdir()
    token.write_text("t")
    (tmp_path / "tokens" / "ticket-2").write_text("other")
    box = _box(tmp_path, read_only=(tmp_path / "bin", token, tmp_path / "missing"))
    argv = sandbox.command(box, ["x"], bwrap="/usr/bin/bwrap")
    rw = dict(_pairs(argv, "--bind"))
    ro = dict(_pairs(argv, "--ro-bind"))
    assert set(rw) == {str(tmp_path / "work"), str(tmp_path / "state")}
    assert str(tmp_path / "rt") in ro and str(tmp_path / "bin") in ro
    assert str(token) in ro  # its own token file, not the directory of every token
    assert str(token.parent) not in ro and str(token.parent) not in rw
    assert str(tmp_path / "missing") not in ro
    assert not any(p.startswith(str(tmp_path / "tokens" / "ticket-2")) for p in [*ro, *rw])
    # the system read-only, never read-write; nothing of the host's root or /root
    for system in ("/usr", "/etc"):
        assert ro.get(system) == system
    assert "/" not in ro and "/" not in rw and "/root" not in ro and "/root" not in rw


def test_a_symbolic_link_is_bound_at_its_name_and_its_target(tmp_path):
    real = tmp_path / "real-rt"
    real.mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "rt").symlink_to(real)
    box = sandbox.Sandbox(workdir=tmp_path / "work", state_dir=tmp_path / "state",
                          runtimes_dir=tmp_path / "rt")
    ro = _pairs(sandbox.command(box, ["x"], bwrap="/usr/bin/bwrap"), "--ro-bind")
    assert (str(real), str(tmp_path / "rt")) in ro and (str(real), str(real)) in ro


def test_relayed_ports_start_the_inner_relay_before_the_runtime(tmp_path):
    box = _box(tmp_path, ports=(8000, 9999))
    argv = sandbox.command(box, ["node", "cli.js"], bwrap="/usr/bin/bwrap",
                           python="/usr/bin/python3")
    tail = argv[argv.index("--") + 1:]
    assert tail[:4] == ["/usr/bin/python3", "-I", "-S", "-c"]
    # the sockets are seen at a short path inside, whatever the state directory's length
    assert tail[5:10] == ["2", "8000", "/run/amux-relay/8000.sock", "9999",
                          "/run/amux-relay/9999.sock"]
    assert tail[10:] == ["node", "cli.js"]
    assert box.relay_socket(8000).parent == tmp_path / "state" / "relay"
    head = argv[:argv.index("--")]
    at = head.index(str(tmp_path / "state" / "relay"))
    assert head[at - 1:at + 2] == ["--bind", str(tmp_path / "state" / "relay"),
                                   "/run/amux-relay"]


def test_the_relayed_ports_are_amux_s_and_a_provider_s_on_this_host():
    amux = "http://127.0.0.1:8000"
    assert sandbox.relayed_ports(amux, "https://api.openai.com/v1") == (8000,)
    assert sandbox.relayed_ports(amux, "http://localhost:9000/v1") == (8000, 9000)
    assert sandbox.relayed_ports(amux, "http://127.0.0.1:8000/gateway") == (8000,)
    assert sandbox.relayed_ports(amux, None, ["http://127.0.0.1:7000/mcp",
                                              "https://mcp.example.com/"]) == (8000, 7000)
    assert sandbox.relayed_ports(None, None) == ()


def test_a_provider_beyond_this_host_is_refused_with_the_reason():
    why = sandbox.unreachable_provider("https://api.openai.com/v1")
    assert why and "bwrap" in why and "api.openai.com" in why and "linux-dac" in why
    assert sandbox.unreachable_provider("http://127.0.0.1:9/v1") is None


def test_a_launch_that_cannot_reach_its_provider_fails_naming_bwrap(tmp_path):
    """A bwrap launch refuses a provider its network cannot reach, before anything is
    started or re-permissioned, rather than a runtime failing on every model request."""
    if os.geteuid() != 0:
        pytest.skip("bwrap launches switch to the runtime user, which needs root")
    with pytest.raises(errors.RuntimeStartFailed, match="bwrap: the model provider "
                       "https://api.openai.com/v1 is not on this host"):
        isolation.Launch.prepare(isolation.BWRAP, isolation.DEFAULT_USER,
                                 tmp_path / "state", tmp_path / "work",
                                 provider_url="https://api.openai.com/v1")
    assert not (tmp_path / "work").exists()
