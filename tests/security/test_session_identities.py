"""One identity per session, tried from inside: two sessions made through amux, each with
its own runtime user leased from the pool; from a real runtime's shell (Pi and Codex,
under linux-dac and under bwrap) session A tries to reach session B — its files, its
HOME, its token, its process — and amux; every attempt fails while A's own paths work.
Then what an archived session leaves is out of reach of the next holder of its uid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.urls import reverse

from runtimes import get_adapter, isolation, sandbox
from runtimes.events import MessageCompleted
from sessions import identities, services
from sessions.models import RuntimeIdentity, Session
from sessions.new_session import Launch
from tests.support import escapes
from tests.support.isolation import as_root
from tests.support.model_server import Text, ToolCall
from tests.support.runtimes import collect, run_async, terminals

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300), as_root]

SECRET = "session-b-secret-do-not-leak"
MODELS = {"codex": "gpt-5.5", "pi": "scripted-model"}
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
SCRIPT = escapes.PREAMBLE + r"""
try other_read cat {other}/secret.txt
try other_list ls -A {other}
try other_write touch {other}/planted
try other_home ls -A {other_state}
try other_home_file cat {other_state}/home/secret.txt
try other_token cat {other_token}
try other_environ cat /proc/{other_pid}/environ
try other_signal kill -0 {other_pid}
try other_ptrace python3 -c "$attach" {other_pid}
try amux_environ cat /proc/{pid}/environ
try amux_signal kill -0 {pid}
try amux_ptrace python3 -c "$attach" {pid}
try secret_key cat {data}/secret_key
try data_list ls -A {data}
try work_list ls -A {data}/work
try write_data touch {data}/escape
try token_dir_list ls -A {tokens}
try write_etc touch /etc/amux-escape
try write_runtimes touch {runtimes}/escape
try setuid_su su -c 'id -u' root
try sudo sudo -n id -u
try shadow cat /etc/shadow
try root_home ls -A /root
try own_token cat {own_token}
try own_write bash -c 'echo written > written.txt && cat written.txt'
try who id -un
"""
ESCAPES = ("other_read", "other_list", "other_write", "other_home", "other_home_file",
           "other_token", "other_environ", "other_signal", "other_ptrace", "amux_environ",
           "amux_signal", "amux_ptrace", "secret_key", "data_list", "work_list",
           "write_data", "token_dir_list", "write_etc", "write_runtimes", "setuid_su", "sudo",
           "shadow", "root_home")


def _provider(model_server, runtime):
    from sessions.models import ProviderProfile

    provider = ProviderProfile.objects.create(
        slug="scripted", platform="openai-compat", base_url=model_server.base_url,
        model_names=[MODELS[runtime]])
    provider.secrets = {"api_key": "sk-test-secret"}
    provider.save()
    return provider


def _token(data: Path, name: str, text: str) -> Path:
    """A token file as amux writes one for a session (tickets.worker.write_token)."""
    from sessions import isolation as session_isolation

    path = data / "run" / "worker-tokens" / name
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text)
    path.chmod(0o600)
    session_isolation.share_with_session(path, None)
    return path


def _launch(session: Session) -> isolation.Launch:
    config = services.runtime_config(Session.objects.get(pk=session.pk), launch=False)
    return isolation.Launch.prepare(config.isolation, config.runtime_user, config.state_dir,
                                    config.workdir, config.runtimes_dir,
                                    config.workdir_roots, shared_group=config.runtime_group,
                                    private_files=config.private_files)


def _as(user: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run([SETPRIV, f"--reuid={user}", f"--regid={user}", "--init-groups",
                           "/bin/sh", "-c", command], capture_output=True, text=True,
                          timeout=30, cwd="/")


def _run_escapes(session: Session, runtime: str, script: str, values: dict,
                 model_server) -> tuple:
    """One real turn of ``session``'s runtime in which the scripted model has the agent run
    ``script`` (its ``{name}`` placeholders filled from ``values``): (config, events)."""
    for key, value in values.items():
        script = script.replace("{" + key + "}", str(value))
    (Path(session.workdir) / "escapes.sh").write_text(script)
    model_server.script(ToolCall("bash escapes.sh"), Text("done"))
    config = services.runtime_config(Session.objects.get(pk=session.pk))

    async def main():
        adapter = get_adapter(runtime)(config)
        try:
            await adapter.start()
            return await collect(adapter, "try to get out", timeout=180)
        finally:
            await adapter.close()

    return config, run_async(main())


def _backend(settings, backend: str) -> None:
    settings.AMUX_ISOLATION = backend
    if backend == isolation.BWRAP:
        base = isolation.provision(settings.AMUX_RUNTIME_USER)
        why = sandbox.probe(base.uid, base.gid)
        if why is not None:
            # the kernel forbids unprivileged namespaces here: amux then runs sessions under
            # linux-dac, whose variant of each test still runs
            pytest.skip(f"bwrap cannot start a sandbox on this machine ({why}); the "
                        "linux-dac variant covers the backend amux uses here")


@pytest.mark.parametrize("backend", [isolation.LINUX_DAC, isolation.BWRAP])
@pytest.mark.parametrize("runtime", ["pi", "codex"])
def test_a_session_cannot_reach_another_session_or_amux(runtime, backend, settings,
                                                        session_dirs, model_server):
    from tests.runtimes.conftest import require_runtime

    require_runtime(runtime)
    _backend(settings, backend)
    data = Path(settings.DATA_DIR)
    (data / "secret_key").write_text(SECRET)
    (data / "secret_key").chmod(0o600)
    provider = _provider(model_server, runtime)
    own_token, other_token = _token(data, "ticket-1", "own-token"), \
        _token(data, "ticket-2", SECRET)
    a = services.create_session(Launch.direct(runtime=runtime, provider=provider.slug,
                                              model=MODELS[runtime],
                                              env={"AMUX_ASSIGNMENT_TOKEN_FILE": str(own_token)}))
    b = services.create_session(Launch.direct(runtime=runtime, provider=provider.slug,
                                              model=MODELS[runtime],
                                              env={"AMUX_ASSIGNMENT_TOKEN_FILE": str(other_token)}))
    # B's runtime, as B's identity, with a secret in its environment and in its files
    b_launch = _launch(b)
    (Path(b.workdir) / "secret.txt").write_text(SECRET)
    b_state = services.state_dir(b)
    (b_state / "home").mkdir(exist_ok=True)
    (b_state / "home" / "secret.txt").write_text(SECRET)
    b_launch = _launch(b)  # the files amux wrote there: B's
    other = subprocess.Popen(["sleep", "600"], env={"B_SESSION_KEY": SECRET},  # noqa: S607
                             **b_launch.spawn_kwargs())
    try:
        config, events = _run_escapes(a, runtime, SCRIPT, {
            "other": b.workdir, "other_state": b_state, "other_token": other_token,
            "other_pid": other.pid, "pid": os.getpid(), "data": data,
            "tokens": own_token.parent, "own_token": own_token,
            "runtimes": Path(settings.AMUX_RUNTIMES_DIR).resolve()}, model_server)
    finally:
        other.kill()
    assert [e.type for e in terminals(events)] == ["turn.completed"], events
    assert [e.text for e in events if isinstance(e, MessageCompleted)] == ["done"]
    found = escapes.attempts(Path(a.workdir))
    a_user = RuntimeIdentity.objects.get(session=a).user
    b_user = RuntimeIdentity.objects.get(session=b).user
    assert a_user != b_user and config.runtime_user == a_user
    assert found["who"] == (0, a_user)
    escaped = {name: found[name] for name in ESCAPES
               if found[name][0] == 0 or SECRET in found[name][1]}
    if backend == isolation.BWRAP:
        # the sandbox's own tree: the way to A's paths and nothing else, and a write there
        # lands in the sandbox (the host's data directory is checked below)
        for name in ("data_list", "work_list", "token_dir_list", "write_data"):
            if SECRET not in found[name][1]:
                escaped.pop(name, None)
        # session-bin: the read-only `amux` command a runtime without MCP (Pi) reaches its
        # memory tools with, the same for every session and holding no secret
        assert set(found["data_list"][1].split()) <= {"run", "runtime", "work", "session-bin"}
        assert found["work_list"][1].split() == [Path(a.workdir).name]
        assert found["token_dir_list"][1].split() == ["ticket-1"]
    assert escaped == {}, escaped
    assert found["own_token"] == (0, "own-token")
    assert found["own_write"] == (0, "written")
    assert not (Path(b.workdir) / "planted").exists() and not (data / "escape").exists()
    assert not Path("/etc/amux-escape").exists()
    assert not (Path(settings.AMUX_RUNTIMES_DIR) / "escape").exists()


def test_an_archived_sessions_identity_goes_to_the_next_session_with_nothing_of_it(
        settings, session_dirs, model_server, client, operator):
    _backend(settings, isolation.LINUX_DAC)
    provider = _provider(model_server, "pi")
    b = services.create_session(Launch.direct(runtime="pi", provider=provider.slug,
                                              model="scripted-model"))
    launch = _launch(b)
    user = launch.principal.user
    snapshot_identity = Session.objects.get(pk=b.pk).snapshot["identity"]
    assert snapshot_identity == {"user": user, "uid": launch.principal.uid}
    assert _launch(b).principal.user == user  # a resume runs as the same identity
    client.force_login(operator)  # the session's page names it
    page = client.get(reverse("panel-session", args=[b.pk])).content.decode()
    assert f'<code id="session-identity">{user}</code> (uid {launch.principal.uid})' in page
    # what B's runtime leaves: a file in its work directory, one in /tmp, a background job
    done = _as(user, f"echo {SECRET} > {b.workdir}/kept.txt && "
                     f"echo {SECRET} > /tmp/amux-left-{b.pk} && cat {b.workdir}/kept.txt")
    assert done.stdout.strip() == SECRET, done.stderr
    job = subprocess.Popen(["sleep", "600"], **launch.spawn_kwargs())  # noqa: S607
    try:
        services.archive(b.pk)  # no host holds it: released at once
        deadline = time.monotonic() + 10
        while job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job.poll() is not None, "the archived session's background job still runs"
    finally:
        job.kill()
    assert not RuntimeIdentity.objects.filter(session=b).exists()
    assert not Path(f"/tmp/amux-left-{b.pk}").exists()
    st = Path(b.workdir).stat()
    assert (st.st_uid, st.st_mode & 0o777) == (os.geteuid(), 0o700)
    # the next session gets the freed slot, and none of B's files
    c = services.create_session(Launch.direct(runtime="pi", provider=provider.slug,
                                              model="scripted-model"))
    assert identities.for_session(Session.objects.get(pk=c.pk)) == user
    done = _as(user, f"cat {b.workdir}/kept.txt")
    assert done.returncode != 0 and SECRET not in done.stdout
    # and an archived session never takes an identity again
    with pytest.raises(Exception, match="archived"):
        identities.for_session(Session.objects.get(pk=b.pk))


def test_a_runtime_user_is_made_outside_the_transaction_that_leases_it(
        settings, session_dirs, model_server, monkeypatch):
    """useradd takes the system's user database lock: made inside a session's creating
    transaction (a ticket's, a conversation's) it would hold that transaction's row locks
    as long. Each slot's user is made ahead, before a lease or once the last one commits."""
    from django.db import connection, transaction

    _backend(settings, isolation.LINUX_DAC)
    # a pool of this test's own, so every user in it is made here (and removed after)
    settings.AMUX_RUNTIME_POOL = f"{settings.AMUX_RUNTIME_POOL}x"
    pool = [isolation.pool_user(settings.AMUX_RUNTIME_POOL, n) for n in (1, 2, 3, 4)]
    made, real = [], isolation.provision_member

    def watched(user, shared):
        new = isolation.lookup(user, shared) is None
        found = real(user, shared)
        if new:
            made.append((user, connection.in_atomic_block))
        return found

    monkeypatch.setattr(isolation, "provision_member", watched)
    provider = _provider(model_server, "pi")
    launch = Launch.direct(runtime="pi", provider=provider.slug, model="scripted-model")
    try:
        first = services.create_session(launch)  # on its own: made before its transaction
        with transaction.atomic():  # inside a caller's: its user was made after the first
            second = services.create_session(launch)
        users = [RuntimeIdentity.objects.get(session=s).user for s in (first, second)]
        assert users == pool[:2]
        assert made == [(pool[0], False), (pool[1], False), (pool[2], False)]
    finally:
        isolation.remove_pool(settings.AMUX_RUNTIME_POOL)

    # The first lease on a machine, inside a caller's transaction: a worker that starts
    # has made its user already (a new pool: none of its users exists; slots 1 and 2 are
    # still leased, so the next slots are 3 and 4).
    from sessions import tasks

    settings.AMUX_RUNTIME_POOL = f"{settings.AMUX_RUNTIME_POOL}y"
    pool = [isolation.pool_user(settings.AMUX_RUNTIME_POOL, n) for n in (3, 4)]
    made.clear()
    try:
        settings.AMUX_ISOLATION = isolation.PRIVATE_HOME  # sessions run as amux's user:
        tasks.runtime_user_ahead()  # a worker starting makes no runtime user
        assert made == []
        _backend(settings, isolation.LINUX_DAC)
        tasks.runtime_user_ahead()
        assert made == [(pool[0], False)]
        with transaction.atomic():
            third = services.create_session(launch)
        assert RuntimeIdentity.objects.get(session=third).user == pool[0]
        assert made == [(pool[0], False), (pool[1], False)]
    finally:
        isolation.remove_pool(settings.AMUX_RUNTIME_POOL)


def test_a_work_directory_is_one_sessions_only(api, settings, session_dirs, openai_provider):
    first = api.post("/api/v1/sessions/", {"runtime": "codex", "provider": "scripted",
                                           "model": "gpt-5.5"}, format="json")
    assert first.status_code == 201, first.content
    workdir = first.json()["workdir"]
    for taken in (workdir, f"{workdir}/sub", str(Path(workdir).parent)):
        if Path(taken) == Path(settings.WORK_DIR):
            continue
        answer = api.post("/api/v1/sessions/", {"runtime": "codex", "provider": "scripted",
                                                "model": "gpt-5.5", "workdir": taken},
                          format="json")
        assert answer.status_code == 400, (taken, answer.content)
        assert "work directory" in answer.json()["error"]["fields"]["workdir"][0]
    # once that session is archived, its directory may be worked in again
    services.archive(first.json()["id"])
    again = api.post("/api/v1/sessions/", {"runtime": "codex", "provider": "scripted",
                                           "model": "gpt-5.5", "workdir": workdir},
                     format="json")
    assert again.status_code == 201, again.content


LOOPBACK = escapes.PREAMBLE + r"""
tcp='exec 3<>/dev/tcp/$1/$2 && printf "GET / HTTP/1.0\r\n\r\n" >&3 && timeout 2 head -c 64 <&3'
try postgres bash -c "$tcp" - 127.0.0.1 5432
try redis bash -c "$tcp" - 127.0.0.1 6379
try redis_v6 bash -c "$tcp" - ::1 6379
try other_port bash -c "$tcp" - 127.0.0.1 {forbidden}
try other_port_host_address bash -c "$tcp" - {host_address} {forbidden}
try amux_port bash -c "$tcp" - 127.0.0.1 {amux_port}
"""


def _listening(host: str) -> tuple[socket.socket, int]:
    """A local service the session must not reach (it answers whoever connects)."""
    server = socket.create_server((host, 0))
    server.settimeout(0.2)

    def answer():
        while server.fileno() != -1:
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                conn.sendall(b"a-local-service-answered\n")
                conn.close()

    threading.Thread(target=answer, daemon=True).start()
    return server, server.getsockname()[1]


def _host_address() -> str:
    """One of this host's own addresses that is not on the loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.123", 9))  # no packet is sent: only the route is looked up
        return probe.getsockname()[0]


def test_a_linux_dac_session_reaches_amux_and_nothing_else_on_this_hosts_addresses(
        settings, session_dirs, model_server):
    """The loopback fence, tried from inside a real Pi turn: PostgreSQL, Redis (IPv4 and
    IPv6) and a local service on the loopback and on the host's other address refuse the
    session's runtime user, while amux's own port (the model gateway the turn itself goes
    through) answers; once the session is archived, its uid reaches amux's port no more."""
    from urllib.parse import urlsplit

    from runtimes import loopback_fence
    from tests.runtimes.conftest import require_runtime

    require_runtime("pi")
    why = loopback_fence.problem()
    if why is not None:
        pytest.skip(f"the loopback fence cannot be set up here ({why}); amux doctor says so")
    _backend(settings, isolation.LINUX_DAC)
    provider = _provider(model_server, "pi")
    session = services.create_session(Launch.direct(runtime="pi", provider=provider.slug,
                                                    model="scripted-model"))
    server, forbidden = _listening("0.0.0.0")  # noqa: S104 (every address of the host)
    amux_port = urlsplit(settings.AMUX_URL).port
    try:
        _, events = _run_escapes(session, "pi", LOOPBACK, {
            "forbidden": forbidden, "host_address": _host_address(),
            "amux_port": amux_port}, model_server)
        # the same service answers amux's own user: only the session's is refused
        with socket.create_connection(("127.0.0.1", forbidden), timeout=5) as conn:
            assert conn.recv(64).startswith(b"a-local-service")
    finally:
        server.close()
    assert [e.type for e in terminals(events)] == ["turn.completed"], events
    found = escapes.attempts(Path(session.workdir))
    reached = {name: found[name] for name in ("postgres", "redis", "redis_v6", "other_port",
                                              "other_port_host_address")
               if found[name][0] == 0 or "refused" not in found[name][1].lower()}
    assert reached == {}, reached
    assert found["amux_port"][0] == 0 and found["amux_port"][1].startswith("HTTP/1."), found
    user = RuntimeIdentity.objects.get(session=session).user
    services.archive(session.pk)
    done = _as(user, f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{amux_port}'")
    assert done.returncode != 0 and "refused" in done.stderr.lower(), done
