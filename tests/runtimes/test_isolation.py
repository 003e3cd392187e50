"""Isolation backends with the real runtimes: under linux-dac the runtime runs as the
dedicated unprivileged user (its shell tools too), its state directory is that user's
alone, files it writes in the work directory stay group-writable, and IS_SANDBOX is set
only there; under private-home the runtime runs as amux's user without IS_SANDBOX."""

from __future__ import annotations

import os
import stat

import pytest

from runtimes import isolation
from runtimes.events import MessageCompleted
from tests.runtimes.conftest import require_runtime
from tests.support.isolation import as_root
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import adapter_for, collect, make_config, run_async, terminals

pytestmark = pytest.mark.timeout(240)
RUNTIMES = ["codex", "pi", "acp", "claude"]


@pytest.fixture(params=RUNTIMES)
def runtime(request):
    require_runtime(request.param)
    return request.param


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        pairs = [item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item]
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def _run(runtime, cfg, model_server, tool=True):
    model_server.script(*([ToolCall("id -u > uid.txt; touch made-here")] if tool else []),
                        Text("done"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()
            env = _environ(adapter.proc.pid)
            euid = isolation.process_euid(adapter.proc.pid)
            events = await collect(adapter, "who are you")
            return adapter, env, euid, events
        finally:
            await adapter.close()

    return run_async(main())


@as_root
def test_linux_dac_runs_the_runtime_as_the_unprivileged_user(runtime, tmp_path, model_server):
    cfg = make_config(runtime, tmp_path, model_server.base_url, isolation=isolation.LINUX_DAC)
    adapter, env, euid, events = _run(runtime, cfg, model_server)
    principal = isolation.lookup(cfg.runtime_user)
    assert principal is not None and principal.uid not in (0, os.geteuid())
    assert euid == principal.uid
    assert [e.type for e in terminals(events)] == ["turn.completed"]
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["done"]
    # its tools run as that user too
    assert (cfg.workdir / "uid.txt").read_text().strip() == str(principal.uid)
    made = (cfg.workdir / "made-here").stat()
    assert made.st_uid == principal.uid and made.st_mode & stat.S_IWGRP
    assert cfg.workdir.stat().st_gid == principal.gid
    # the compatibility marker, only after the UID check; HOME is the session's own
    assert env["IS_SANDBOX"] == "1"
    assert env["HOME"] == str(cfg.state_dir / "home")
    assert "CLAUDE_CONFIG_DIR" not in env
    # what amux wrote for the runtime (configs, keys) is that user's alone
    state = cfg.state_dir.stat()
    assert (state.st_uid, stat.S_IMODE(state.st_mode)) == (principal.uid, 0o700)
    for root, _dirs, files in os.walk(cfg.state_dir):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                assert os.lstat(path).st_uid == principal.uid, path


def test_private_home_runs_as_amux_without_is_sandbox(runtime, tmp_path, model_server):
    cfg = make_config(runtime, tmp_path, model_server.base_url,
                      isolation=isolation.PRIVATE_HOME)
    # Claude refuses its bypass mode as root without IS_SANDBOX: ask mode, no tool
    as_root_claude = runtime == "claude" and os.geteuid() == 0
    if as_root_claude:
        cfg.permission_mode = "ask"
    adapter, env, euid, events = _run(runtime, cfg, model_server, tool=not as_root_claude)
    assert euid == os.geteuid()
    assert "IS_SANDBOX" not in env
    assert "CLAUDE_CONFIG_DIR" not in env
    assert env["HOME"] == str(cfg.state_dir / "home")
    assert terminals(events)


def test_linux_dac_refuses_an_unreachable_directory(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("linux-dac needs root")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    os.chmod(tmp_path, 0o711)
    with pytest.raises(Exception, match="cannot reach the work directory"):
        isolation.Launch.prepare(isolation.LINUX_DAC, isolation.DEFAULT_USER,
                                 tmp_path / "state", locked / "work")


def test_auto_backend_as_root_is_bwrap_when_its_probe_works_else_linux_dac():
    expected = isolation.BWRAP if isolation.auto_reason() is None else isolation.LINUX_DAC
    assert isolation.auto_backend(0) == expected
    assert isolation.auto_backend(1000) == isolation.PRIVATE_HOME


@as_root
def test_bwrap_runs_the_runtime_in_its_sandbox_as_the_unprivileged_user(
        runtime, tmp_path, model_server):
    """Under bwrap the runtime (and its tools) runs as the runtime user in its own pid
    namespace, with the work directory writable and the scripted model reached through
    the relay; the model's reply comes back."""
    from runtimes import sandbox

    principal = isolation.provision(isolation.DEFAULT_USER)
    why = sandbox.probe(principal.uid, principal.gid)
    if why is not None:
        pytest.skip(f"bwrap cannot start here: {why}")
    cfg = make_config(runtime, tmp_path, model_server.base_url, isolation=isolation.BWRAP)
    model_server.script(ToolCall("id -u > uid.txt; ls /proc | grep -c '^[0-9]' > pids.txt"),
                        Text("done"))

    async def main():
        adapter = adapter_for(runtime, cfg)
        try:
            await adapter.start()
            euid = isolation.process_euid(adapter.proc.pid)
            return euid, await collect(adapter, "who are you")
        finally:
            await adapter.close()

    euid, events = run_async(main())
    assert euid == principal.uid
    assert [e.type for e in terminals(events)] == ["turn.completed"], events
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["done"]
    assert (cfg.workdir / "uid.txt").read_text().strip() == str(principal.uid)
    assert int((cfg.workdir / "pids.txt").read_text()) < 30  # its own pid namespace


@as_root
def test_a_launch_never_shares_a_work_directory_outside_its_roots(tmp_path):
    """A session stored with a work directory outside work/ (an older amux accepted any),
    or one whose path leads out through a symbolic link planted since, is refused before
    anything there is created or re-permissioned."""
    os.chmod(tmp_path, 0o711)
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o711)
    outside = tmp_path / "root-only"
    outside.mkdir(mode=0o700)
    (outside / "secret").write_text("x")
    (work / "session-1").symlink_to(outside)
    for workdir in (outside, work / "session-1", work / "session-1" / "sub", work):
        with pytest.raises(Exception, match="is not under") as caught:
            isolation.Launch.prepare(isolation.LINUX_DAC, isolation.DEFAULT_USER,
                                     tmp_path / "state", workdir, workdir_roots=(work,))
        assert "refusing" in str(caught.value)
    for path in (outside, outside / "secret"):
        st = path.lstat()
        assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0o700 if path.is_dir() else 0o600)
    assert not (outside / "sub").exists()

    inside = work / "session-2"
    launch = isolation.Launch.prepare(isolation.LINUX_DAC, isolation.DEFAULT_USER,
                                      tmp_path / "state", inside, workdir_roots=(work,))
    assert inside.stat().st_gid == launch.principal.gid


@as_root
def test_sharing_a_work_directory_changes_only_what_is_in_it(tmp_path):
    """What amux made in a work directory joins the runtime user's group (group read/write,
    setgid directories), through descriptors that never follow a link: links to a
    root-only directory and file outside leave those as they were, and a FIFO or a socket
    in it neither blocks nor stops the walk."""
    import socket

    principal = isolation.verified_principal(isolation.DEFAULT_USER)
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    (outside / "secret").write_text("x")
    (outside / "secret").chmod(0o600)
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "main.py").write_text("print()\n")
    (work / "run.sh").write_text("#!/bin/sh\n")
    (work / "run.sh").chmod(0o700)
    (work / "to-dir").symlink_to(outside)
    (work / "to-file").symlink_to(outside / "secret")
    os.mkfifo(work / "fifo", 0o600)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(work / "sock"))
    try:
        isolation.share_workdir(work, principal)
    finally:
        listener.close()
    for path, mode in {work: 0o2770, work / "src": 0o2770, work / "src" / "main.py": 0o660,
                       work / "run.sh": 0o770, work / "fifo": 0o660}.items():
        st = path.lstat()
        assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (principal.gid, mode), path
    for path, mode in {outside: 0o700, outside / "secret": 0o600}.items():
        st = path.lstat()
        assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (0, mode), path
