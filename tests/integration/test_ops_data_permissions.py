"""The start-up permission pass (`amux run`, `restart`, `upgrade`) closes the data
directory but leaves what sessions need as the code that made it left it, and opens it
again where an older amux's pass closed it: a worker resumed after a restart still runs
`amux`, reads its gitconfig, its token and the mirror its clone borrows objects from — as
the linux-dac runtime user, for real — while the secret key, the database and the run
state stay amux's alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from amux_site import operations, session_paths
from runtimes import isolation
from sessions import services
from sessions.models import ProviderProfile
from tests import factories as f
from tests.integration import test_workspace
from tests.integration.test_workspace import REPO, _ticket
from tests.support.isolation import as_root
from tickets import worker, workspace

pytestmark = [pytest.mark.django_db,
              as_root]

USER = "amux-agent"
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"

# the workspace tests' real git server and recording GitHub, and their GitHub source
servers = test_workspace.servers
source = test_workspace.source


def _as(user: str, command: str, env: dict[str, str], cwd: Path | None = None):
    """``command`` as ``user`` with the groups the system gives it (a pool user: its own
    and the shared runtime group), as a session's runtime runs."""
    return subprocess.run([SETPRIV, f"--reuid={user}", f"--regid={user}", "--init-groups",
                           "/bin/sh", "-c", command], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def _launch(session) -> isolation.Launch:
    """What a session's (re)start does before its runtime runs: services.runtime_config
    opens the directories on the way and leases the session's identity, the backend
    prepares the state and work dirs and hands the session its token."""
    config = services.runtime_config(session, launch=False)
    return isolation.Launch.prepare(isolation.LINUX_DAC, config.runtime_user,
                                    config.state_dir, config.workdir,
                                    shared_group=config.runtime_group,
                                    private_files=config.private_files)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def test_a_restart_leaves_what_sessions_need_and_closes_the_rest(settings, servers, source):
    git_server, _api = servers
    settings.AMUX_ISOLATION, settings.AMUX_RUNTIME_USER = "linux-dac", USER
    data = Path(settings.DATA_DIR)
    data.mkdir(parents=True, exist_ok=True)
    # what an older amux (another umask) left readable
    (data / "secret_key").write_text("s3cret")
    (data / "amux.sqlite3").write_text("db")
    (data / "backups").mkdir()
    (data / "run").mkdir()
    (data / "run" / "state.json").write_text("{}")
    for path in (data / "secret_key", data / "amux.sqlite3", data / "run" / "state.json"):
        path.chmod(0o644)
    for path in (data, data / "backups", data / "run"):
        path.chmod(0o755)

    # a worker dispatched as production dispatches it
    ticket = _ticket(source, 1)
    workdir = workspace.prepare(ticket)  # mirror + clone borrowing its objects
    worker.setup()  # worker-bin, gitconfig
    token = worker.write_token(ticket, "amux_at_token")
    provider = ProviderProfile.objects.create(slug="p", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1",
                                              model_names=["m"])
    session = f.SessionFactory(workdir=str(workdir), provider=provider,
                               runtime_env={"AMUX_ASSIGNMENT_TOKEN_FILE": str(token)})
    ticket.session = session
    ticket.save(update_fields=["session"])
    launch = _launch(session)
    user = launch.principal.user
    assert user.startswith(f"{settings.AMUX_RUNTIME_POOL}-") and launch.principal.groups

    def _as_runtime_user(command: str, env: dict[str, str], cwd: Path | None = None):
        return _as(user, command, env, cwd)

    env = launch.environment({
        "PATH": f"{worker.bin_dir()}:/usr/bin:/bin", "HOME": "/nonexistent",
        "GIT_CONFIG_GLOBAL": str(worker.gitconfig_path()), "GIT_CONFIG_NOSYSTEM": "1",
        "LANG": "C.UTF-8"}, workdir)
    # an amux from before restarts: its pass closed every top-level entry
    operations.make_private(data)
    assert _as_runtime_user("amux --help", env).returncode != 0

    session_paths.make_private()  # this amux restarts: what sessions need is open again
    session_paths.make_private()  # and again: nothing drifts
    launch = _launch(session)  # the worker's session resumes
    assert launch.principal.user == user  # as the same identity
    # the worker's command is on its PATH and runs
    done = _as_runtime_user("amux --help", env)
    assert done.returncode == 0 and "usage: amux" in done.stdout, done.stderr
    # its gitconfig (amux's credential helper) and its token are readable
    done = _as_runtime_user("git config --global --get-all credential.helper", env)
    assert done.stdout.split("\n")[1] == f"{worker.bin_dir()}/git-credential-amux", done
    assert _as_runtime_user(f"test -x {worker.bin_dir()}/git-credential-amux", env
                            ).returncode == 0
    assert _as_runtime_user(f"cat {token}", env).stdout == "amux_at_token"
    # the clone's objects live in the mirror (alternates): git reads them
    mirror = workspace.mirror_dir(git_server.clone_url(REPO))
    assert (workdir / ".git/objects/info/alternates").read_text().strip() == str(
        mirror / "objects")
    done = _as_runtime_user("git log -1 --format=%H && git show HEAD:README.md", env, workdir)
    assert done.returncode == 0 and done.stdout.endswith("hello\n"), done.stderr

    # everything else is closed: to the runtime user and by its modes
    for path in ("secret_key", "amux.sqlite3", "run/state.json"):
        assert _mode(data / path) == 0o600, path
        assert _as_runtime_user(f"cat {data / path}", env).returncode != 0, path
    assert _mode(data / "backups") == 0o700
    assert _as_runtime_user(f"ls {data}", env).returncode != 0  # search only, no listing
    assert _as_runtime_user(f"ls {data / 'run'}", env).returncode != 0
    assert {p: _mode(data / p) for p in ("", "run", "work", "runtime", "mirrors")} == {
        p: 0o701 for p in ("", "run", "work", "runtime", "mirrors")}
    # and what sessions need stays exactly as its creators made it
    assert _mode(worker.bin_dir()) == 0o750
    assert _mode(worker.gitconfig_path()) == 0o644
    assert _mode(worker.tokens_dir()) == 0o710 and _mode(token) == 0o640
    # another session's runtime user reads neither its token nor its work directory, and
    # cannot even list the mirror's owner's directories
    other = _launch(f.SessionFactory(provider=provider))
    assert other.principal.user != user and other.principal.uid != launch.principal.uid
    for command in (f"cat {token}", f"ls {workdir}", f"cat {workdir}/README.md"):
        done = _as(other.principal.user, command, env)
        assert done.returncode != 0 and "amux_at_token" not in done.stdout, command
    done = _as(other.principal.user, "amux --help", env)  # the shared tools: for all
    assert done.returncode == 0, done.stderr
