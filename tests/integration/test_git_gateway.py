"""amux's git gateway (/gateway/git/<owner>/<repo>.git) as a worker meets it: the real ASGI
app under uvicorn, the worker's own git with the gitconfig and credential helper amux
writes for it, real assignment tokens, and a real upstream (git http-backend over smart
HTTP, the source's token as its password) behind the gateway."""

from __future__ import annotations

import base64
import os
import subprocess
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

from tests import factories as f
from tests.support.asgi_thread import AsgiThread
from tests.support.git_server import GitServer
from tests.support.recording_server import RecordingServer
from tickets import worker, workspace
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import Assignment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

TOKEN = "ghp_upstream_secret_77"
REPO = "octo/app"


@pytest.fixture
def world(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    workspace._origins.clear()
    with GitServer(token=TOKEN) as git_server, RecordingServer() as api, AsgiThread() as amux:
        api.git = git_server
        api.state.github_token = TOKEN
        main = git_server.create(REPO, {"README.md": "hello\n"})
        git_server.create("octo/other", {"README.md": "other\n"})
        settings.AMUX_URL = amux.url
        source = f.SourceFactory(
            config={"repo": [REPO, "octo/other"], "api_url": api.url, "handle": "amux-bot",
                    "default_branch": "main"},
            secrets={"webhook_secret": "s", "token": TOKEN})
        worker.setup()
        yield SimpleNamespace(git=git_server, api=api, amux=amux, source=source, main=main,
                              home=tmp_path)


def _worker(world, number: int):
    """A ticket's worker as dispatch leaves it: its clone, its token file, its env."""
    trigger = f.TriggerFactory(
        source=world.source, thread__key=f"{REPO}#{number}", thread__title="Crash",
        external_id=f"c{number}", text="@amux-bot please fix", addressed=False, rule="")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title=f"Fix {number}")
    workdir = workspace.prepare(ticket)
    assignment = Assignment.objects.get(ticket=ticket)
    token = executor.issue_assignment_token(assignment_id=assignment.pk)
    worker.write_token(ticket, token)
    env = {**worker.environment(ticket), "HOME": str(world.home), "LANG": "C.UTF-8",
           "PATH": f"{worker.bin_dir()}:/usr/bin:/bin"}

    def run(*argv, cwd=workdir, stdin=None):
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=120, input=stdin)

    return SimpleNamespace(ticket=ticket, workdir=workdir, token=token, run=run,
                           assignment=assignment, branch=f"amux/{ticket.short_name}")


def _commit(w, name: str, text: str, message: str) -> str:
    (w.workdir / name).write_text(text)
    assert w.run("git", "add", name).returncode == 0
    done = w.run("git", "commit", "-qm", message)
    assert done.returncode == 0, done.stderr
    return w.run("git", "rev-parse", "HEAD").stdout.strip()


def _receive_packs(git_server) -> int:
    return sum(1 for method, path, _s, _n in git_server.requests
               if method == "POST" and "git-receive-pack" in path)


def _files_containing(root, needle: str) -> list:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def _get(url: str, password: str | None = None):
    request = urllib.request.Request(url)
    if password is not None:
        basic = base64.b64encode(f"amux:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {basic}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_a_worker_clones_and_pushes_its_own_branch_through_the_gateway(world):
    w = _worker(world, 1)
    gateway = f"{world.amux.url}/gateway/git/{REPO}.git"
    assert w.run("git", "remote", "get-url", "origin").stdout.strip() == gateway
    # A fresh clone through the gateway (any ref of the repository).
    clone = w.run("git", "clone", "-q", gateway, str(world.home / "fresh"), cwd=world.home)
    assert clone.returncode == 0, clone.stderr
    assert (world.home / "fresh" / "README.md").read_text() == "hello\n"

    # Its own branch lands upstream, a pack bigger than git's postBuffer included (git
    # then sends a probe first and the pack chunked).
    (w.workdir / "big.bin").write_bytes(os.urandom(1_500_000))
    w.run("git", "add", "big.bin")
    first = _commit(w, "fix.txt", "fixed\n", "Fix the crash")
    pushed = w.run("git", "push", "-q")
    assert pushed.returncode == 0, pushed.stderr
    assert world.git.sha(REPO, w.branch) == first
    assert world.git.show(REPO, w.branch, "fix.txt") == "fixed\n"

    # A force-push rewrites its own branch.
    amended = w.run("git", "commit", "-q", "--amend", "-m", "Fix the crash, better")
    assert amended.returncode == 0, amended.stderr
    rewritten = w.run("git", "rev-parse", "HEAD").stdout.strip()
    forced = w.run("git", "push", "-q", "--force")
    assert forced.returncode == 0, forced.stderr
    assert world.git.sha(REPO, w.branch) == rewritten != first

    # Fetching sees refs others pushed.
    other = world.git.commit_on(REPO, "main", {"NEWS.md": "news\n"}, "News")
    fetched = w.run("git", "fetch", "-q", "origin", "main")
    assert fetched.returncode == 0, fetched.stderr
    assert w.run("git", "rev-parse", "origin/main").stdout.strip() == other

    # The upstream only ever met amux's credential: the worker's git met the gateway's 401.
    assert not [r for r in world.git.requests if r[2] == "401"]
    assert _files_containing(w.workdir, TOKEN) == []
    assert _files_containing(world.home / "fresh", TOKEN) == []


def test_pushes_to_main_another_tickets_branch_or_tags_are_refused_upstream_untouched(world):
    mine, theirs = _worker(world, 1), _worker(world, 2)
    _commit(theirs, "theirs.txt", "theirs\n", "Their work")
    assert theirs.run("git", "push", "-q").returncode == 0
    their_sha = world.git.sha(REPO, theirs.branch)
    _commit(mine, "fix.txt", "fixed\n", "Fix")
    before = _receive_packs(world.git)

    to_main = mine.run("git", "push", "origin", "HEAD:main")
    assert to_main.returncode != 0
    assert (f"! [remote rejected] HEAD -> main (amux: a worker may push only its ticket's "
            f"branch {mine.branch})") in to_main.stderr
    forced = mine.run("git", "push", "--force", "origin", "HEAD:main")
    assert "! [remote rejected] HEAD -> main (amux:" in forced.stderr
    foreign = mine.run("git", "push", "--force", "origin", f"HEAD:{theirs.branch}")
    assert foreign.returncode != 0
    assert f"! [remote rejected] HEAD -> {theirs.branch} (amux: a worker may push only" in (
        foreign.stderr)
    assert mine.run("git", "tag", "v1").returncode == 0
    tag = mine.run("git", "push", "origin", "v1")
    assert "! [remote rejected] v1 -> v1 (amux: a worker may not push tags" in tag.stderr
    # One refused ref refuses the whole push: its own branch does not land either.
    both = mine.run("git", "push", "origin", f"HEAD:{mine.branch}", "HEAD:main")
    assert both.returncode != 0
    assert f"! [remote rejected] HEAD -> {mine.branch} (amux: not pushed, another ref" in (
        both.stderr)

    assert _receive_packs(world.git) == before  # nothing of it reached the upstream
    assert world.git.sha(REPO, "main") == world.main
    assert world.git.sha(REPO, theirs.branch) == their_sha
    assert not world.git.has_branch(REPO, mine.branch)
    assert world.git.sha(REPO, "v1") is None

    # Its own branch may not be deleted (that would close its pull request).
    assert mine.run("git", "push", "-q", "origin", mine.branch).returncode == 0
    deleted = mine.run("git", "push", "origin", f":{mine.branch}")
    assert f"! [remote rejected] {mine.branch} (amux: a worker may not delete" in (
        deleted.stderr)
    assert world.git.has_branch(REPO, mine.branch)


def test_bad_ended_or_missing_tokens_get_401_and_other_repositories_404(world):
    w = _worker(world, 1)
    refs = f"{world.amux.url}/gateway/git/{REPO}.git/info/refs?service=git-upload-pack"
    status, headers, _body = _get(refs)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    status, headers, body = _get(refs, "amx_not-a-real-token")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert TOKEN.encode() not in body
    status, headers, body = _get(refs, w.token)
    assert status == 200 and headers["Content-Type"] == (
        "application/x-git-upload-pack-advertisement")
    assert b"refs/heads/main" in body
    other = f"{world.amux.url}/gateway/git/octo/other.git/info/refs?service=git-upload-pack"
    assert _get(other, w.token)[0] == 404
    assert _get(f"{world.amux.url}/gateway/git/{REPO}.git/info/refs", w.token)[0] == 403
    assert _get(f"{world.amux.url}/gateway/git/{REPO}.git/HEAD", w.token)[0] == 404

    executor.assignment_ended(assignment_id=w.assignment.pk, reason="done")
    assert _get(refs, w.token)[0] == 401
    fetched = w.run("git", "fetch", "origin")
    assert fetched.returncode != 0
    assert TOKEN not in fetched.stderr


def test_the_credential_helper_answers_only_the_assignment_token_for_the_gateway(world):
    w = _worker(world, 1)
    host = world.amux.url.split("//", 1)[1]
    ask = f"protocol=http\nhost={host}\npath=gateway/git/{REPO}.git\n\n"
    filled = w.run("git", "credential", "fill", stdin=ask)
    assert filled.returncode == 0, filled.stderr
    assert f"password={w.token}\n" in filled.stdout
    assert TOKEN not in filled.stdout
    # The upstream itself (or anything else): no credential at all.
    upstream = world.git.url.split("//", 1)[1]
    for request in (f"protocol=http\nhost={upstream}\npath={REPO}.git\n\n",
                    f"protocol=https\nhost=github.com\npath={REPO}.git\n\n",
                    f"protocol=http\nhost={host}\npath=gateway/git/octo/other.git\n\n"):
        refused = w.run("git", "credential", "fill", stdin=request)
        assert "password=" not in refused.stdout and TOKEN not in refused.stdout + (
            refused.stderr)
        assert "credentials are given only for amux's git gateway" in refused.stderr
    # And the worker's git, pointed straight at the upstream, gets nowhere.
    direct = w.run("git", "ls-remote", world.git.clone_url(REPO))
    assert direct.returncode != 0


def test_a_refused_push_is_read_to_its_end_and_never_held_in_memory(world):
    """The gateway itself, driven as uvicorn drives it: a push to main with a 48 MB pack
    behind its command list is answered with git's report, the pack read and dropped."""
    import tracemalloc

    from tests.support.runtimes import run_async
    from tickets import git_gateway
    from tickets.core.git_push import pkt_line

    w = _worker(world, 1)
    basic = base64.b64encode(f"amux:{w.token}".encode())
    host = world.amux.url.split("//", 1)[1].encode()
    scope = {"type": "http", "method": "POST", "query_string": b"",
             "path": f"/gateway/git/{REPO}.git/git-receive-pack",
             "headers": [(b"host", host), (b"authorization", b"Basic " + basic),
                         (b"content-type", b"application/x-git-receive-pack-request")]}
    commands = pkt_line(b"%s %s refs/heads/main\0report-status side-band-64k\n"
                        % (world.main.encode(), b"b" * 40)) + b"0000"
    chunk, chunks = b"P" * 65536, 768
    sent = {"n": 0}
    answered = []

    async def receive():
        sent["n"] += 1
        if sent["n"] == 1:
            return {"type": "http.request", "body": commands + b"PACK", "more_body": True}
        return {"type": "http.request", "body": chunk, "more_body": sent["n"] <= chunks}

    async def send(message):
        answered.append(message)

    tracemalloc.start()
    try:
        run_async(git_gateway.answer(scope, receive, send))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sent["n"] == chunks + 1  # every byte of it was read …
    assert peak < 8 * 1024 * 1024, peak  # … and none of it kept
    assert answered[0]["status"] == 200
    assert b"ng refs/heads/main amux: a worker may push only" in answered[1]["body"]
    assert _receive_packs(world.git) == 0
