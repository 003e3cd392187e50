"""A real git server on 127.0.0.1: bare repositories served over smart HTTP by git's own
`git http-backend` (run as a CGI program), standing in for github.com's git side.

Every request needs HTTP basic auth whose password is the repository owner's token (any
user name, as GitHub takes `x-access-token`); anything else answers 401 with
`WWW-Authenticate`, so git asks its credential helper exactly as it does with GitHub.

    with GitServer(token="ghp_test") as git:
        git.create("octo/app", {"README.md": "hello\n"})
        git.clone_url("octo/app")          # http://127.0.0.1:PORT/octo/app.git
        git.has_branch("octo/app", "amux/fix")
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.loopback_http import LoopbackServer, QuietHandler

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
GIT_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "LANG": "C.UTF-8"}


def git(*args: str, cwd: str | Path | None = None, env: dict | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**GIT_ENV, **(env or {})}, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


class GitServer(LoopbackServer):
    def __init__(self, token: str, root: str | Path | None = None):
        self.token = token
        self._tmp = None if root else tempfile.TemporaryDirectory(prefix="gitserver-")
        self.root = Path(root or self._tmp.name)
        # (method, path?query, status, bytes answered)
        self.requests: list[tuple[str, str, str, int]] = []
        server = self

        class Handler(QuietHandler):
            def _body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.read_body()

            def _authorized(self) -> str | None:
                header = self.headers.get("Authorization") or ""
                scheme, _, value = header.partition(" ")
                if scheme.lower() != "basic":
                    return None
                try:
                    user, _, password = base64.b64decode(value).decode().partition(":")
                except (ValueError, UnicodeDecodeError):
                    return None
                return (user or "git") if password == server.token else None

            def _handle(self):
                body = self._body() if self.command == "POST" else b""
                user = self._authorized()
                if user is None:
                    server.requests.append((self.command, self.path, "401", 0))
                    self.reply(401, b"authentication required\n",
                               [("WWW-Authenticate", 'Basic realm="git"')])
                    return
                url = urlsplit(self.path)
                env = {**GIT_ENV, "GIT_PROJECT_ROOT": str(server.root),
                       "GIT_HTTP_EXPORT_ALL": "1", "REMOTE_USER": user,
                       "REMOTE_ADDR": "127.0.0.1", "REQUEST_METHOD": self.command,
                       "PATH_INFO": url.path, "QUERY_STRING": url.query,
                       "CONTENT_TYPE": self.headers.get("Content-Type") or "",
                       "CONTENT_LENGTH": str(len(body)),
                       "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1"}
                for name in ("Content-Encoding", "Git-Protocol"):
                    if self.headers.get(name):
                        env["HTTP_" + name.upper().replace("-", "_")] = self.headers[name]
                done = subprocess.run([HTTP_BACKEND], input=body, capture_output=True,
                                      env=env, timeout=120)
                head, _, payload = done.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.strip().split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                server.requests.append((self.command, self.path, str(status), len(payload)))
                self.reply(status, payload, [
                    (name, value) for name, value in headers
                    if name.lower() not in ("content-length", "transfer-encoding")])

            do_GET = do_POST = _handle

        self.listen(Handler)

    @property
    def url(self) -> str:
        return self.origin

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self._tmp is not None:
            self._tmp.cleanup()

    # -- repositories ----------------------------------------------------------------------
    def path(self, repo: str) -> Path:
        return self.root / f"{repo}.git"

    def clone_url(self, repo: str) -> str:
        return f"{self.url}/{repo}.git"

    def create(self, repo: str, files: dict[str, str], branch: str = "main") -> str:
        """A bare repository with one commit of `files` on `branch`; its sha."""
        bare = self.path(repo)
        bare.parent.mkdir(parents=True, exist_ok=True)
        git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(bare))
        with tempfile.TemporaryDirectory() as work:
            git("init", "--quiet", f"--initial-branch={branch}", work)
            for name, text in files.items():
                (Path(work) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(work) / name).write_text(text)
            git("add", "-A", cwd=work)
            git("-c", "user.name=Octo Cat", "-c", "user.email=octocat@example.com",
                "commit", "--quiet", "-m", "Initial commit", cwd=work)
            git("push", "--quiet", str(bare), f"{branch}:{branch}", cwd=work)
        return self.sha(repo, branch)

    def sha(self, repo: str, branch: str) -> str | None:
        try:
            return git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                       cwd=self.path(repo)).strip() or None
        except RuntimeError:
            return None

    def has_branch(self, repo: str, branch: str) -> bool:
        return self.path(repo).exists() and self.sha(repo, branch) is not None

    def show(self, repo: str, rev: str, path: str) -> str:
        return git("show", f"{rev}:{path}", cwd=self.path(repo))

    def log(self, repo: str, rev: str) -> list[str]:
        return git("log", "--format=%an <%ae>|%s", rev, cwd=self.path(repo)).splitlines()

    def commit_on(self, repo: str, branch: str, files: dict[str, str], message: str) -> str:
        """Another commit on `branch` (someone else pushed)."""
        with tempfile.TemporaryDirectory() as work:
            git("clone", "--quiet", "--branch", branch, str(self.path(repo)), work)
            for name, text in files.items():
                (Path(work) / name).write_text(text)
            git("add", "-A", cwd=work)
            git("-c", "user.name=Octo Cat", "-c", "user.email=octocat@example.com",
                "commit", "--quiet", "-m", message, cwd=work)
            git("push", "--quiet", "origin", branch, cwd=work)
        return self.sha(repo, branch)

    def bytes_served(self, repo: str) -> int:
        """Bytes answered so far to fetches and clones of `repo`."""
        return sum(size for _method, path, _status, size in self.requests
                   if path.startswith(f"/{repo}.git/"))


@contextlib.contextmanager
def served_github(repos=("octo/app",), token: str = "ghp_test"):
    """The recording GitHub whose repositories are real ones on a GitServer (each with a
    README on main), for tests whose tickets are dispatched: a dispatch clones the ticket's
    repository. Yields (api, git); point a GitHub source's `api_url` at `api.url` and give
    it `token`."""
    from tests.support.recording_server import RecordingServer

    with GitServer(token) as git_server, RecordingServer() as api:
        api.git = git_server
        api.state.github_token = token  # like GitHub: another token gets 401
        for repo in repos:
            git_server.create(repo, {"README.md": f"{repo}\n"})
        yield api, git_server
