"""A ticket's working copy and its credentials, against a real git server (git
http-backend over smart HTTP, basic auth) and PyGithub against the recording GitHub."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from rest_framework.test import APIClient

from effects import outbox
from intake.sources import github as github_plugin
from intake.sources.base import ConfigError
from intake.sources.webchat import WebChat
from tests import factories as f
from tests.support.asgi_thread import AsgiThread
from tests.support.git_server import GitServer, git
from tests.support.recording_server import RecordingServer
from tickets import worker, workspace
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import Assignment
from tickets.tools.worker_bin import install_worker_bin

pytestmark = pytest.mark.django_db

TOKEN = "ghp_sourcetoken123"
REPO = "octo/app"


@pytest.fixture
def servers(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    workspace._origins.clear()
    with GitServer(token=TOKEN) as git_server, RecordingServer() as api:
        api.git = git_server
        api.state.github_token = TOKEN  # another token gets GitHub's 401
        # Big enough that a second download would show.
        git_server.create(REPO, {"README.md": "hello\n", "data.bin": os.urandom(300_000).hex()})
        git_server.create("octo/other", {"README.md": "other\n"})
        yield git_server, api


@pytest.fixture
def amux_server(settings):
    """amux's real ASGI app (the git gateway with Django) where the worker reaches amux."""
    with AsgiThread() as amux:
        settings.AMUX_URL = amux.url
        yield amux


@pytest.fixture
def source(servers):
    _git, api = servers
    return f.SourceFactory(
        config={"repo": [REPO, "octo/other"], "api_url": api.url, "handle": "amux-bot",
                "default_branch": "main"},
        secrets={"webhook_secret": "s", "token": TOKEN})


def _ticket(source, number: int):
    trigger = f.TriggerFactory(
        source=source, thread__key=f"{REPO}#{number}", thread__title="Crash",
        external_id=f"c{number}", text="@amux-bot please fix", addressed=False, rule="")
    return ticket_commands.open_ticket(trigger_id=trigger.pk, title=f"Fix {number}")


def _files_containing(root: Path, needle: str) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            found.append(path)
    return found


def test_a_ticket_works_in_a_clone_on_its_own_branch(servers, source, settings):
    git_server, _api = servers
    ticket = _ticket(source, 1)
    workdir = workspace.prepare(ticket)
    assert workdir == Path(worker.work_dir(ticket))
    assert (workdir / "README.md").read_text() == "hello\n"
    assert git("branch", "--show-current", cwd=workdir).strip() == f"amux/{ticket.short_name}"
    # The worker's remote is amux's git gateway, never the upstream itself.
    assert git("remote", "get-url", "origin", cwd=workdir).strip() == (
        f"{settings.AMUX_URL}/gateway/git/{REPO}.git")
    assert git("config", "user.name", cwd=workdir).strip() == "amux-bot"
    assert git("config", "user.email", cwd=workdir).strip() == (
        "amux-bot@users.noreply.github.com")
    # The source's token is nowhere under the work directory or the mirror.
    assert _files_containing(workdir, TOKEN) == []
    assert _files_containing(workspace.mirror_dir(git_server.clone_url(REPO)), TOKEN) == []


def test_a_token_github_refuses_fails_the_workspace_with_a_clear_reason(servers, source):
    source.secrets = {"webhook_secret": "s", "token": "ghp_revoked"}
    source.save()
    with pytest.raises(workspace.WorkspaceError) as refused:
        workspace.prepare(_ticket(source, 1))
    assert "401" in str(refused.value) or "credentials" in str(refused.value).lower()
    assert "ghp_revoked" not in str(refused.value)


def test_the_second_ticket_on_a_repository_does_not_download_it_again(servers, source):
    git_server, _api = servers
    first = workspace.prepare(_ticket(source, 1))
    served_first = git_server.bytes_served(REPO)
    assert served_first > 300_000
    git_server.commit_on(REPO, "main", {"NEWS.md": "new\n"}, "Add news")
    second = workspace.prepare(_ticket(source, 2))
    served_second = git_server.bytes_served(REPO) - served_first
    # Only the new commit travelled; the clone borrows the mirror's objects.
    assert served_second < 20_000, served_second
    mirror = workspace.mirror_dir(git_server.clone_url(REPO))
    alternates = (second / ".git/objects/info/alternates").read_text().strip()
    assert Path(alternates) == mirror / "objects"
    assert (second / "NEWS.md").read_text() == "new\n"
    assert not (first / "NEWS.md").exists()  # a working copy is never moved under a worker


def test_a_revived_ticket_keeps_its_directory_and_branch(servers, source):
    ticket = _ticket(source, 1)
    workdir = workspace.prepare(ticket)
    (workdir / "fix.txt").write_text("half done\n")
    git("add", "fix.txt", cwd=workdir)
    git("commit", "-qm", "wip", cwd=workdir)
    head = git("rev-parse", "HEAD", cwd=workdir).strip()
    assert workspace.prepare(ticket) == workdir
    assert git("rev-parse", "HEAD", cwd=workdir).strip() == head
    assert git("branch", "--show-current", cwd=workdir).strip() == f"amux/{ticket.short_name}"


def test_a_lost_directory_is_rebuilt_from_the_pushed_branch(servers, source):
    git_server, _api = servers
    ticket = _ticket(source, 1)
    workdir = workspace.prepare(ticket)
    (workdir / "fix.txt").write_text("pushed\n")
    git("add", "fix.txt", cwd=workdir)
    git("commit", "-qm", "wip", cwd=workdir)
    branch = f"amux/{ticket.short_name}"
    git("push", "-q", str(git_server.path(REPO)), f"{branch}:{branch}", cwd=workdir)
    shutil.rmtree(workdir)  # the host that had it is gone
    workdir = workspace.prepare(ticket)
    assert (workdir / "fix.txt").read_text() == "pushed\n"
    assert git("branch", "--show-current", cwd=workdir).strip() == branch


def test_a_chat_ticket_gets_an_empty_directory_or_its_default_repository(servers, source):
    chat = f.SourceFactory(kind="webchat", slug="team", name="Team")
    trigger = f.TriggerFactory(source=chat, thread__key="general", thread__title="Chat",
                               external_id="m1", scope="direct", actor="alice",
                               text="please", addressed=False, rule="")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Chat work")
    workdir = workspace.prepare(ticket)
    assert workdir.is_dir() and list(workdir.iterdir()) == []
    workdir.rmdir()
    with pytest.raises(ConfigError):
        WebChat.validate_config({"repo": "not a repository"})
    chat.config = WebChat.validate_config({"repo": REPO})
    chat.save()
    ticket.thread.source.refresh_from_db()
    workdir = workspace.prepare(ticket)
    assert (workdir / "README.md").exists()


# --- credentials -----------------------------------------------------------------------------


def _assignment_token(ticket) -> tuple[Assignment, str]:
    assignment = Assignment.objects.get(ticket=ticket)
    return assignment, executor.issue_assignment_token(assignment_id=assignment.pk)


def _pull_request(token: str, body: dict):
    """The worker's `tools/pull_request` call with its assignment token."""
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return api.post("/api/v1/tools/pull_request/", body, format="json")


def _ask(token: str, **body):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return api.post("/api/v1/tools/git_credential/", body, format="json")


def test_the_credential_is_the_assignment_token_for_the_gateway_only(servers, source,
                                                                     settings):
    git_server, _api = servers
    ticket = _ticket(source, 1)
    _assignment, token = _assignment_token(ticket)
    amux = settings.AMUX_URL.split("//", 1)[1]
    ok = _ask(token, protocol="http", host=amux, path=f"gateway/git/{REPO}.git")
    assert ok.status_code == 200, ok.content
    assert ok.json()["password"] == token and TOKEN not in ok.content.decode()
    upstream = git_server.url.split("//", 1)[1]
    for other in ({"protocol": "http", "host": upstream, "path": f"{REPO}.git"},
                  {"protocol": "http", "host": amux, "path": "gateway/git/octo/other.git"},
                  {"protocol": "http", "host": "github.com", "path": f"{REPO}.git"},
                  {"protocol": "https", "host": amux, "path": f"gateway/git/{REPO}.git"}):
        refused = _ask(token, **other)
        assert refused.status_code == 403, other
        assert TOKEN not in refused.content.decode() and token not in refused.content.decode()
    assert _ask(token, protocol="http").status_code == 400


def test_an_ended_assignment_gets_no_credential(servers, source, settings):
    ticket = _ticket(source, 1)
    assignment, token = _assignment_token(ticket)
    executor.assignment_ended(assignment_id=assignment.pk, reason="done")
    refused = _ask(token, protocol="http", host=settings.AMUX_URL.split("//", 1)[1],
                   path=f"gateway/git/{REPO}.git")
    assert refused.status_code == 403 and TOKEN not in refused.content.decode()


def test_a_revived_clone_made_before_the_gateway_is_pointed_at_it(servers, source, settings):
    git_server, _api = servers
    ticket = _ticket(source, 1)
    workdir = workspace.prepare(ticket)
    git("remote", "set-url", "origin", git_server.clone_url(REPO), cwd=workdir)
    assert workspace.prepare(ticket) == workdir
    assert git("remote", "get-url", "origin", cwd=workdir).strip() == (
        f"{settings.AMUX_URL}/gateway/git/{REPO}.git")
    # A remote of the worker's own making (a local path) is left alone.
    git("remote", "set-url", "origin", str(git_server.path(REPO)), cwd=workdir)
    workspace.prepare(ticket)
    assert git("remote", "get-url", "origin", cwd=workdir).strip() == str(
        git_server.path(REPO))


def test_a_github_app_mints_a_token_for_the_one_repository_and_keeps_it(servers):
    _git, api = servers
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    plug = github_plugin.GitHub({"repo": [REPO], "api_url": api.url},
                                {"app_id": "7", "private_key": key})
    github_plugin._minted.clear()
    assert plug.git_credential(REPO) == ("x-access-token", "ghs_installation")
    assert plug.git_credential(REPO) == ("x-access-token", "ghs_installation")
    minted = api.matching("POST", r"/app/installations/\d+/access_tokens")
    assert len(minted) == 1 and minted[0].body["repositories"] == ["app"]
    with pytest.raises(Exception, match="not a repository of this source"):
        plug.git_credential("octo/elsewhere")


# --- pushing and the pull request ------------------------------------------------------------


def test_amux_pr_pushes_a_branch_the_remote_lacks_then_links_the_issue(servers, source):
    git_server, api = servers
    ticket = _ticket(source, 1)
    api.state.issues[(REPO, 1)] = {"title": "Crash"}
    workdir = workspace.prepare(ticket)
    branch = f"amux/{ticket.short_name}"
    (workdir / "fix.txt").write_text("fixed\n")
    git("add", "fix.txt", cwd=workdir)
    git("commit", "-qm", "Fix the crash", cwd=workdir)
    # A hook planted in the work directory never runs with amux's credential.
    hook = workdir / ".git/hooks/pre-push"
    hook.write_text(f"#!/bin/sh\nenv > {workdir}/leak.txt\n")
    hook.chmod(0o755)
    assert not git_server.has_branch(REPO, branch)
    _assignment, token = _assignment_token(ticket)
    answer = _pull_request(token, {"title": "Fix the crash", "head": branch})
    assert answer.status_code == 201, answer.content
    assert git_server.show(REPO, branch, "fix.txt") == "fixed\n"
    created = api.matching("POST", rf"/repos/{REPO}/pulls")
    assert len(created) == 1 and created[0].body["head"] == branch
    assert created[0].body["base"] == "main"
    assert created[0].body["body"].endswith("Fixes #1")
    assert not (workdir / "leak.txt").exists()
    assert _files_containing(workdir, TOKEN) == []
    mirror = workspace.mirror_dir(git_server.clone_url(REPO))
    assert not git("for-each-ref", "refs/amux", cwd=mirror).strip()


def test_a_branch_that_exists_nowhere_is_refused_and_github_is_not_asked(servers, source):
    _git, api = servers
    ticket = _ticket(source, 1)  # no work directory: its branch is nowhere
    _assignment, token = _assignment_token(ticket)
    branch = f"amux/{ticket.short_name}"
    answer = _pull_request(token, {"title": "Fix", "head": branch})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "not_pushed"
    assert branch in answer.json()["error"]["message"]
    assert not api.matching("POST", rf"/repos/{REPO}/pulls")


def test_a_pull_request_from_another_branch_than_the_tickets_own_is_409_naming_head(
        servers, source):
    git_server, api = servers
    mine, theirs = _ticket(source, 1), _ticket(source, 2)
    api.state.issues[(REPO, 2)] = {"title": "Crash"}
    their_branch = f"amux/{theirs.short_name}"
    git("push", "-q", str(git_server.path(REPO)), f"HEAD:{their_branch}",
        cwd=workspace.prepare(theirs))
    _assignment, token = _assignment_token(mine)
    api_client = APIClient()
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    for head in (their_branch, "main", f"octo:amux/{mine.short_name}"):
        answer = api_client.post("/api/v1/tools/pull_request/",
                                 {"title": "Fix", "head": head}, format="json")
        assert answer.status_code in (400, 409), answer.content
        error = answer.json()["error"]
        assert "head" in error["fields"], error
    answer = api_client.post("/api/v1/tools/pull_request/",
                             {"title": "Fix", "head": their_branch}, format="json")
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "not_own_branch"
    assert f"amux/{mine.short_name}" in answer.json()["error"]["fields"]["head"][0]
    assert not api.matching("POST", rf"/repos/{REPO}/pulls")
    mine.refresh_from_db()
    assert not mine.pr_url


def test_github_refuses_a_pull_request_from_a_branch_it_does_not_have(servers, source):
    plug = github_plugin.GitHub(source.config, source.secrets)
    with pytest.raises(Exception, match="head invalid"):
        plug.open_pull_request(repo=REPO, title="x", body="", head="amux/none", base="main")


# --- the worker's commands and git configuration ------------------------------------------


def test_an_unknown_file_in_the_command_directory_fails_the_dispatch(servers, source):
    from sessions.models import ProviderProfile
    from tickets.models import AgentSettings

    provider = ProviderProfile.objects.create(slug="local", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    install_worker_bin(worker.bin_dir())
    (worker.bin_dir() / "git").write_text("#!/bin/sh\necho gotcha\n")
    ticket = _ticket(source, 1)
    outbox.drain(seconds=10)
    assignment = Assignment.objects.get(ticket=ticket)
    assert assignment.state == "failed" and assignment.failure_code == "worker_setup"
    assert f"unknown file in the worker's command directory: {worker.bin_dir() / 'git'}" in (
        assignment.failure_message)


def test_the_worker_environment_and_gitconfig_hold_no_credential(servers, source, monkeypatch):
    monkeypatch.setenv("GH_TOKEN", "ghp_operator")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_operator")
    ticket = _ticket(source, 1)
    worker.setup()
    env = worker.environment(ticket)
    assert "GH_TOKEN" not in env and "GITHUB_TOKEN" not in env
    assert env["GIT_CONFIG_GLOBAL"] == str(worker.gitconfig_path())
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    text = worker.gitconfig_path().read_text()
    assert f"helper = {worker.bin_dir() / 'git-credential-amux'}" in text
    assert 'insteadOf = git@github.com:' in text and TOKEN not in text
    # The gh shim answers plainly instead of acting with someone else's credential.
    done = subprocess.run([str(worker.bin_dir() / "gh"), "issue", "list"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 1 and "gh is not available to amux workers" in done.stderr


@pytest.mark.django_db(transaction=True)
def test_the_workers_git_and_gh_act_through_amux(servers, source, amux_server, tmp_path,
                                                 monkeypatch, settings):
    """Outside any runtime: the worker's commands with the worker's environment. `gh pr
    create` opens the PR through amux (which pushes the branch), and a plain `git push`
    goes through amux's git gateway, authenticated by git-credential-amux."""
    git_server, api = servers
    api.state.issues[(REPO, 1)] = {"title": "Crash"}
    ticket = _ticket(source, 1)
    worker.setup()
    workdir = workspace.prepare(ticket)
    _assignment, token = _assignment_token(ticket)
    worker.write_token(ticket, token)
    env = {**worker.environment(ticket), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PATH": f"{worker.bin_dir()}:/usr/bin:/bin"}

    def run(*argv):
        return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=60)

    (workdir / "fix.txt").write_text("fixed\n")
    assert run("git", "add", "fix.txt").returncode == 0
    assert run("git", "commit", "-qm", "Fix the crash").returncode == 0
    branch = f"amux/{ticket.short_name}"
    opened = run("gh", "pr", "create", "--title", "Fix the crash", "--body", "Guards it.")
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip().endswith("/pull/2")
    assert git_server.show(REPO, branch, "fix.txt") == "fixed\n"
    created = api.matching("POST", rf"/repos/{REPO}/pulls")
    assert created[0].body["head"] == branch and created[0].body["body"].endswith("Fixes #1")

    (workdir / "fix.txt").write_text("fixed better\n")
    run("git", "commit", "-qam", "Fix it better")
    pushed = run("git", "push", "-q")
    assert pushed.returncode == 0, pushed.stderr
    assert git_server.show(REPO, branch, "fix.txt") == "fixed better\n"
    # The upstream's own URL gets no credential from amux.
    other = run("git", "ls-remote", git_server.clone_url("octo/other"))
    assert other.returncode != 0 and "credentials are given only for" in other.stderr
    assert _files_containing(workdir, TOKEN) == []


def test_github_failing_to_open_the_pull_request_is_a_clear_503(servers, source):
    git_server, api = servers
    ticket = _ticket(source, 1)
    workdir = workspace.prepare(ticket)
    branch = f"amux/{ticket.short_name}"
    (workdir / "fix.txt").write_text("fixed\n")
    git("add", "fix.txt", cwd=workdir)
    git("commit", "-qm", "Fix", cwd=workdir)
    api.state.fail_next.append(("POST", rf"/repos/{REPO}/pulls", 502))
    _assignment, token = _assignment_token(ticket)
    answer = _pull_request(token, {"title": "Fix", "head": branch})
    assert answer.status_code == 503, answer.content
    assert answer.json()["error"]["code"] == "github_unavailable"
    assert git_server.has_branch(REPO, branch)  # pushed; the retry only opens the PR
    again = _pull_request(token, {"title": "Fix", "head": branch})
    assert again.status_code == 201 and again.json()["created"] is True


# --- what the worker plants for amux's own git ------------------------------------------------


def _plant(workdir: Path, marker: Path) -> None:
    """Everything a worker can write into its clone to make the next git command that
    reads it run a program: hooks, a hooks path of its own, an fsmonitor, a pager, an ssh
    command, and an included config file that sets them again."""
    run = f"#!/bin/sh\necho \"$0 $*\" >> {marker}\n"
    hooks = workdir / "my-hooks"
    hooks.mkdir()
    for name in ("pre-push", "post-checkout", "reference-transaction", "post-merge",
                 "pre-auto-gc", "post-index-change", "fsmonitor-watchman"):
        for place in (workdir / ".git/hooks" / name, hooks / name):
            place.write_text(run)
            place.chmod(0o755)
    program = workdir / "run.sh"
    program.write_text(run)
    program.chmod(0o755)
    for key, value in (("core.hooksPath", str(hooks)), ("core.fsmonitor", str(program)),
                       ("core.pager", str(program)), ("core.sshCommand", str(program)),
                       ("core.editor", str(program)), ("credential.helper", f"!{program}"),
                       ("include.path", str(workdir / "extra.cfg"))):
        git("config", key, value, cwd=workdir)
    (workdir / "extra.cfg").write_text(f"[core]\n\tfsmonitor = {program}\n")


def test_nothing_the_worker_plants_in_its_clone_runs_in_amuxs_git(servers, source,
                                                                   tmp_path):
    git_server, api = servers
    ticket = _ticket(source, 1)
    api.state.issues[(REPO, 1)] = {"title": "Crash"}
    workdir = workspace.prepare(ticket)
    (workdir / "fix.txt").write_text("fixed\n")
    git("add", "fix.txt", cwd=workdir)
    git("commit", "-qm", "Fix", cwd=workdir)
    marker = tmp_path / "ran.txt"
    _plant(workdir, marker)
    assert workspace.prepare(ticket) == workdir  # revived: amux reads its config
    _assignment, token = _assignment_token(ticket)
    branch = f"amux/{ticket.short_name}"
    answer = _pull_request(token, {"title": "Fix", "head": branch})
    assert answer.status_code == 201, answer.content  # amux fetched it and pushed it
    assert git_server.show(REPO, branch, "fix.txt") == "fixed\n"
    assert not marker.exists(), marker.read_text()


def test_a_clone_whose_git_directory_points_elsewhere_is_not_read(servers, source, tmp_path):
    _git, api = servers
    ticket = _ticket(source, 1)
    workdir = workspace.prepare(ticket)
    elsewhere = tmp_path / "elsewhere.git"
    shutil.move(str(workdir / ".git"), elsewhere)
    (workdir / ".git").write_text(f"gitdir: {elsewhere}\n")
    _assignment, token = _assignment_token(ticket)
    answer = _pull_request(token, {"title": "Fix", "head": f"amux/{ticket.short_name}"})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "not_pushed"
    assert "no repository of its own" in answer.json()["error"]["message"]
    assert not api.matching("POST", rf"/repos/{REPO}/pulls")


def _fetches(git_server, repo: str) -> int:
    """Fetches (and clones) of `repo` the server answered: each starts with one
    authorized ref advertisement of git-upload-pack."""
    return sum(1 for method, path, status, _size in git_server.requests
               if method == "GET" and status == "200"
               and path.startswith(f"/{repo}.git/info/refs?service=git-upload-pack"))


@pytest.mark.django_db(transaction=True)  # the tickets are read from threads of their own
def test_tickets_starting_together_on_one_repository_share_one_fetch(servers, source,
                                                                      monkeypatch):
    import threading

    # on a loaded test machine ten threads may take longer than production's gather to
    # reach the mirror after they start together
    monkeypatch.setattr(workspace, "FETCH_GATHER_SECONDS", 1.0)
    git_server, _api = servers
    workspace.prepare(_ticket(source, 1))  # the repository is mirrored already
    before = _fetches(git_server, REPO)
    git_server.commit_on(REPO, "main", {"NEWS.md": "new\n"}, "Add news")
    tickets = [_ticket(source, n) for n in range(2, 12)]
    gate = threading.Barrier(len(tickets))
    made, failed = {}, []

    def start(ticket):
        from django.db import connection

        try:
            gate.wait()
            made[ticket.pk] = workspace.prepare(ticket)
        except Exception as exc:  # noqa: BLE001 - reported below
            failed.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=start, args=(t,)) for t in tickets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failed and len(made) == 10
    assert _fetches(git_server, REPO) - before == 1  # one fetch, not ten in a row
    # and that fetch brought each of them the commit made before they started
    assert all((path / "NEWS.md").read_text() == "new\n" for path in made.values())
    # a ticket that comes after that fetch fetches again
    git_server.commit_on(REPO, "main", {"LATER.md": "later\n"}, "Add later")
    later = workspace.prepare(_ticket(source, 12))
    assert _fetches(git_server, REPO) - before == 2
    assert (later / "LATER.md").read_text() == "later\n"


def test_runs_started_together_share_one_fetch_when_their_clones_are_made_in_turn(
        servers, source):
    """The outbox runs a burst's starts one after another: each run's clone is fresh
    enough from a fetch that began after its run started, so only the first fetches."""
    git_server, _api = servers
    workspace.prepare(_ticket(source, 1))  # the repository is mirrored already
    before = _fetches(git_server, REPO)
    git_server.commit_on(REPO, "main", {"NEWS.md": "new\n"}, "Add news")
    started = time.time()  # three runs start (their dispatches commit) ...
    made = [workspace.prepare(_ticket(source, n), asked=started) for n in (2, 3, 4)]
    assert _fetches(git_server, REPO) - before == 1  # ... and their clones share one fetch
    assert all((path / "NEWS.md").read_text() == "new\n" for path in made)
    # a run that started after that fetch began fetches again
    git_server.commit_on(REPO, "main", {"LATER.md": "later\n"}, "Add later")
    later = workspace.prepare(_ticket(source, 5), asked=time.time())
    assert _fetches(git_server, REPO) - before == 2
    assert (later / "LATER.md").read_text() == "later\n"
