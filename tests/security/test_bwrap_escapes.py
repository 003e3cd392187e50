"""From inside a real runtime under the bwrap backend, the agent's shell tries to leave its
session; every attempt fails, and the legitimate paths work.

One scripted turn per runtime: the scripted model has the agent run ``escapes.sh`` (below)
in its work directory, which tries each escape and writes one line per attempt (name, exit
status, the start of its output) to ``escapes.txt``; each escape is then its own assertion.
The data directory is laid out as amux lays it out, and shared with the runtime user as
linux-dac shares it today (another session's work directory group-writable, every
ticket's token group-readable): what the runtime user could read by its permissions alone
must still be out of its sight in the sandbox.
"""

from __future__ import annotations

import grp
import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from runtimes import isolation, sandbox
from runtimes.events import MessageCompleted
from tests.runtimes.conftest import require_runtime
from tests.support import escapes
from tests.support.isolation import as_root, reachable
from tests.support.model_server import ModelServer, Text, ToolCall
from tests.support.runtimes import adapter_for, collect, make_config, run_async, terminals

pytestmark = [pytest.mark.timeout(300), as_root]
RUNTIMES = ["pi", "codex", "claude"]

SECRET = "amux-secret-do-not-leak"
SCRIPT = escapes.PREAMBLE + r"""
tcp='exec 3<>/dev/tcp/127.0.0.1/$0 && printf "PING\r\n" >&3 && timeout 2 head -c 64 <&3'
try other_session_read cat {data}/work/session-2/secret.txt
try other_session_list ls -A {data}/work/session-2
try data_dir_list ls -A {data}
try secret_key cat {data}/secret_key
try sqlite_file cat {data}/amux.sqlite3
try log_file cat {data}/logs/amux.log
try amux_environ cat /proc/{pid}/environ
try amux_signal kill -0 {pid}
try amux_processes bash -c 'ls /proc | grep -E "^[0-9]+$" | tr "\n" " "'
try amux_ptrace python3 -c "$attach" {pid}
try other_session_ptrace python3 -c "$attach" {other_pid}
try other_session_environ cat /proc/{other_pid}/environ
try other_session_signal kill -0 {other_pid}
try postgres bash -c "$tcp" 5432
try redis bash -c "$tcp" 6379
try other_local_port bash -c "$tcp" {forbidden}
try internet bash -c 'exec 3<>/dev/tcp/1.1.1.1/443'
try write_etc touch /etc/amux-escape
try write_data_dir touch {data}/escape
try write_runtimes touch {runtimes}/escape
try setuid_su su -c 'id -u' root
try sudo sudo -n id -u
try nested_userns unshare -r id -u
try other_token cat {data}/run/worker-tokens/ticket-2
try token_dir_list ls -A {data}/run/worker-tokens
try root_home ls -A /root
try shadow cat /etc/shadow
try privileges grep -E '^(NoNewPrivs|CapEff|CapPrm|Uid)' /proc/self/status
try python_runs python3 -c 'import ctypes; print(ctypes.CDLL(None).getpid() > 0)'
try own_token cat {data}/run/worker-tokens/ticket-1
try workdir_write bash -c 'echo written > written.txt && cat written.txt'
try amux_port python3 -c 'import urllib.request as u; print(u.urlopen("{amux}/").read().decode())'
"""


class _Answer(http.server.BaseHTTPRequestHandler):
    body = b"amux-ok"

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def _serve(body: bytes) -> http.server.ThreadingHTTPServer:
    handler = type("Handler", (_Answer,), {"body": body})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _layout(base: Path, principal: isolation.Principal) -> Path:
    """A data directory as amux makes it, shared with the runtime user as linux-dac does."""
    data = base / "data"
    for sub in ("work/session-1", "work/session-2", "runtime", "logs", "run/worker-tokens"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    for path in (data, data / "work", data / "runtime", data / "run"):
        path.chmod(0o711)
    (data / "secret_key").write_text(SECRET)
    (data / "amux.sqlite3").write_text(SECRET)
    (data / "logs" / "amux.log").write_text(SECRET)
    for path in (data / "secret_key", data / "amux.sqlite3", data / "logs" / "amux.log"):
        path.chmod(0o600)
    other = data / "work" / "session-2"
    (other / "secret.txt").write_text(SECRET)
    isolation.share_workdir(other, principal)  # group-readable by the runtime user today
    tokens = data / "run" / "worker-tokens"
    os.chown(tokens, 0, principal.gid)
    tokens.chmod(0o710)
    for ticket, text in (("ticket-1", "own-token"), ("ticket-2", SECRET)):
        (tokens / ticket).write_text(text)
        os.chown(tokens / ticket, 0, principal.gid)
        (tokens / ticket).chmod(0o640)
    return data


@pytest.fixture(scope="module", params=RUNTIMES)
def attempts(request):
    """{escape: (exit status, output)} from one turn of ``request.param`` under bwrap."""
    runtime = request.param
    require_runtime(runtime)
    principal = isolation.provision(isolation.DEFAULT_USER)
    why = sandbox.probe(principal.uid, principal.gid)
    if why is not None:
        pytest.skip(f"bwrap cannot start a sandbox on this machine: {why}")
    # outside /tmp (the sandbox has a private /tmp of its own, where a write would land
    # unseen), as amux's data usually is: a checkout cloned under /tmp does not count
    base = Path("/var/tmp") / f"amux-security-{os.getpid()}" / f"bwrap-{runtime}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    reachable(base)
    data = _layout(base, principal)
    workdir = data / "work" / "session-1"
    amux, forbidden = _serve(b"amux-ok"), _serve(SECRET.encode())
    amux_url = f"http://127.0.0.1:{amux.server_address[1]}"
    token = data / "run" / "worker-tokens" / "ticket-1"
    # another session's runtime: a process of the same runtime user outside this sandbox,
    # with a secret in its environment (linux-dac shares one user between sessions)
    other = subprocess.Popen(["sleep", "600"], env={"OTHER_SESSION_KEY": SECRET},  # noqa: S607
                             user=principal.uid, group=principal.gid, extra_groups=[])
    request.addfinalizer(other.kill)
    with ModelServer() as model_server:
        cfg = make_config(
            runtime, base, model_server.base_url, isolation=isolation.BWRAP,
            workdir=workdir, state_dir=data / "runtime" / "session-1",
            sandbox_read_only=(token,), amux_url=amux_url,
            extra_env={"AMUX_ASSIGNMENT_TOKEN_FILE": str(token)})
        script = SCRIPT
        for key, value in {"data": data, "pid": os.getpid(), "other_pid": other.pid,
                           "amux": amux_url,
                           "forbidden": forbidden.server_address[1],
                           "runtimes": cfg.runtimes_dir}.items():
            script = script.replace("{" + key + "}", str(value))
        (workdir / "escapes.sh").write_text(script)
        model_server.script(ToolCall("bash escapes.sh"), Text("done"))

        async def main():
            adapter = adapter_for(runtime, cfg)
            try:
                await adapter.start()
                return await collect(adapter, "try to get out", timeout=180)
            finally:
                await adapter.close()

        try:
            events = run_async(main())
        finally:
            amux.shutdown()
            forbidden.shutdown()
    assert [e.type for e in terminals(events)] == ["turn.completed"], events
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["done"]
    found = escapes.attempts(workdir)
    found["_data"] = (0, str(data))
    found["_workdir"] = (0, str(workdir))
    return found


ESCAPES = {  # each must fail: a non-zero exit and nothing of the secret in its output
    "other_session_read": "read a file in another session's work directory",
    "other_session_list": "list another session's work directory",
    "secret_key": "read amux's secret key",
    "sqlite_file": "read amux's SQLite database file",
    "log_file": "read amux's logs",
    "amux_environ": "read /proc/<amux pid>/environ",
    "amux_signal": "signal amux's process",
    "amux_ptrace": "ptrace amux's process",
    "other_session_ptrace": "ptrace another session's runtime (the same runtime user)",
    "other_session_environ": "read another session's runtime's environment",
    "other_session_signal": "signal another session's runtime",
    "postgres": "connect to PostgreSQL on 127.0.0.1:5432",
    "redis": "connect to Redis on 127.0.0.1:6379",
    "other_local_port": "connect to another service on the host's loopback",
    "internet": "connect to an address beyond the host",
    "write_etc": "write to /etc",
    "write_data_dir": "write to amux's data directory",
    "write_runtimes": "write to the installed runtimes",
    "setuid_su": "become root through the setuid su",
    "sudo": "become root through sudo",
    "nested_userns": "make a user namespace of its own (root inside it)",
    "other_token": "read another ticket's assignment token",
    "root_home": "list /root",
    "shadow": "read /etc/shadow",
}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_the_escape_fails(attempts, escape):
    rc, output = attempts[escape]
    assert rc != 0, f"escape succeeded: {ESCAPES[escape]} (exit 0: {output!r})"
    assert SECRET not in output, f"escape leaked the secret: {ESCAPES[escape]}: {output!r}"


def test_the_data_directory_shows_nothing_of_amux(attempts):
    rc, output = attempts["data_dir_list"]
    names = set(output.split())
    leaked = names & {"secret_key", "amux.sqlite3", "logs", "escape"}
    assert not leaked, f"the data directory shows amux's files in the sandbox: {output!r}"
    assert names <= {"work", "runtime", "run"}, f"unexpected entries: {output!r}"


def test_no_other_ticket_token_is_listed(attempts):
    _rc, output = attempts["token_dir_list"]
    assert "ticket-2" not in output, f"another ticket's token file is visible: {output!r}"


def test_amux_processes_are_not_visible(attempts):
    _rc, output = attempts["amux_processes"]
    pids = {int(p) for p in output.split()}
    assert str(os.getpid()) not in output.split(), f"amux's pid is visible: {output!r}"
    assert len(pids) < 40, f"more processes visible than the sandbox's own: {output!r}"


def test_no_privilege_is_left(attempts):
    rc, output = attempts["privileges"]
    status = {m[0]: m[1].split() for m in re.findall(r"(\w+):\s*([0-9a-f ]+)", output)}
    assert rc == 0, output
    assert status["NoNewPrivs"] == ["1"], f"no_new_privs is not set: {output!r}"
    assert int(status["CapEff"][0], 16) == 0, f"a capability is left: {output!r}"
    assert int(status["CapPrm"][0], 16) == 0, f"a capability is left: {output!r}"
    uid = isolation.lookup(isolation.DEFAULT_USER).uid
    assert set(map(int, status["Uid"])) == {uid}, f"not the runtime user: {output!r}"


def test_the_legitimate_paths_work(attempts):
    assert attempts["own_token"] == (0, "own-token"), "its own token file is not readable"
    assert attempts["workdir_write"] == (0, "written"), "its work directory is not writable"
    assert attempts["amux_port"] == (0, "amux-ok"), "amux's port is not reachable"
    # the ptrace attempts fail for the sandbox's reasons, not for want of python3
    assert attempts["python_runs"] == (0, "True"), attempts["python_runs"]
    written = Path(attempts["_workdir"][1]) / "written.txt"
    uid = isolation.lookup(isolation.DEFAULT_USER).uid
    assert written.stat().st_uid == uid  # as the runtime user on the host too
    assert grp.getgrgid(written.stat().st_gid).gr_name == isolation.DEFAULT_USER
    assert not (Path(attempts["_data"][1]) / "escape").exists()


def test_a_sandbox_relays_only_the_listed_ports():
    """The relayed ports are amux's and a provider's on this host; nothing else."""
    assert sandbox.relayed_ports("http://127.0.0.1:8000", "https://api.openai.com/v1") == \
        (8000,)
    assert sandbox.relayed_ports("http://127.0.0.1:8000", "http://127.0.0.1:9999/v1") == \
        (8000, 9999)
    assert socket.AF_UNIX  # the relay's transport
