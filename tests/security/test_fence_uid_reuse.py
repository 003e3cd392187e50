"""A uid the system hands to a new runtime user keeps nothing of the loopback fence of
the user that had it before. Pool users are removed (a test run's, a bench's) and their
uids given out again; an app-server amux spawns runs unfenced by design, and a stale
REJECT chain for its uid once cut it off from amux's own model gateway."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest

from runtimes import isolation
from runtimes import loopback_fence as fence
from tests.support.isolation import as_root

pytestmark = [as_root, pytest.mark.timeout(120)]
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"


def _rules() -> str:
    return subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True,  # noqa: S607
                          check=True).stdout


def _connects_as(user: str, port: int) -> bool:
    """Whether ``user`` connects to ``port`` on the loopback (False: refused)."""
    done = subprocess.run(
        [SETPRIV, f"--reuid={user}", f"--regid={user}", "--init-groups", "/usr/bin/python3",
         "-c", "import socket, sys\n"
               "try: socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
               "except ConnectionRefusedError: print('refused')\n"
               "else: print('connected')", str(port)],
        capture_output=True, text=True, timeout=30, cwd="/")
    assert done.stdout.strip() in ("connected", "refused"), done.stderr
    return done.stdout.strip() == "connected"


def test_a_new_user_on_a_former_users_uid_is_not_fenced_by_its_rules(settings):
    why = fence.problem()
    if why is not None:
        pytest.skip(f"the loopback fence cannot be set up here ({why})")
    pool, shared = f"{settings.AMUX_RUNTIME_POOL}f", settings.AMUX_RUNTIME_USER
    user = isolation.pool_user(pool, 1)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        first = isolation.provision_member(user, shared)
        assert fence.ensure(first.uid, [], fence.ON) is None  # fenced: no port of its own
        assert not _connects_as(user, port)
        # removed by amux: its fence goes with it
        assert isolation.remove_pool(pool) == 1
        assert fence.chain(first.uid) not in _rules()
        # removed by something else, its fence left behind: the next user made drops it
        again = isolation.provision_member(user, shared)
        assert fence.ensure(again.uid, [], fence.ON) is None
        subprocess.run(["userdel", user], check=True, capture_output=True)  # noqa: S607
        assert fence.chain(again.uid) in _rules()
        latest = isolation.provision_member(user, shared)
        if latest.uid != again.uid:  # useradd gives the highest free system uid, as a rule
            fence.forget(again.uid)
            pytest.skip("another process took the freed uid meanwhile")
        assert fence.chain(latest.uid) not in _rules()
        assert _connects_as(user, port)
    finally:
        listener.close()
        isolation.remove_pool(pool)
