"""A command a shim runs is found on PATH without the shim directory: `gh pr create --fill`
reads the commit through the real git even when the operator disabled `git` for workers
(the disabled shim stands first on the worker's PATH)."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tickets.tools import install_worker_bin


@pytest.fixture
def amux_api():
    """A stand-in for amux's tool endpoint: records what `pull_request` was sent."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, **body})
            answer = json.dumps({"url": "https://github.example/octo/app/pull/1",
                                 "number": 1}).encode()
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/v1", seen
    server.shutdown()


def test_gh_runs_the_real_git_with_the_shim_directory_off_its_path(tmp_path, amux_api):
    url, seen = amux_api
    bin_dir = tmp_path / "worker-bin"
    install_worker_bin(bin_dir, disabled=["git"])
    repo = tmp_path / "clone"
    git = ["git", "-C", str(repo), "-c", "user.name=w", "-c", "user.email=w@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "amux/t1-fix", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "Fix the parser"], check=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "AMUX_API_URL": url,
           "AMUX_ASSIGNMENT_TOKEN": "amx_test", "HOME": str(tmp_path)}
    blocked = subprocess.run(["git", "status"], cwd=repo, env=env, capture_output=True,
                             text=True)
    assert blocked.returncode == 126 and "git is disabled" in blocked.stderr
    made = subprocess.run(["gh", "pr", "create", "--fill"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert seen == [{"path": "/api/v1/tools/pull_request/", "title": "Fix the parser",
                     "head": "amux/t1-fix", "base": None, "body": ""}]
