"""The agent runtimes are installed once per lockfile, with real npm: unchanged lockfile →
no install and no registry; a failed install keeps what was there and never raises."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from amux_site import runtimes_install
from runtimes import isolation
from tests.support.isolation import as_root, reachable

pytestmark = pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")

# A real registry package pinned with its real integrity; the registry below is a closed
# port, so fetching it fails the way an offline machine does.
LEFT_PAD = {"version": "1.3.0",
            "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
            "integrity": "sha512-XI5MPzVNApjAyhQzphX8BkmKsKUxD4LdyK24iZeQ8NwD9WkOeHv8CChIQeMRtnA"
                         "qWsOa9k7ENcNkoXOqdkFf7A=="}


def write_project(root: Path, version: str, deps: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    package = {"name": "runtimes", "version": version, "private": True}
    lock = {"name": "runtimes", "version": version, "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "runtimes", "version": version}}}
    if deps:
        package["dependencies"] = {"left-pad": "1.3.0"}
        lock["packages"][""]["dependencies"] = {"left-pad": "1.3.0"}
        lock["packages"]["node_modules/left-pad"] = LEFT_PAD
    (root / "package.json").write_text(json.dumps(package))
    (root / "package-lock.json").write_text(json.dumps(lock))
    return root / "node_modules"


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))


def test_installs_once_then_skips_npm_until_the_lockfile_changes(tmp_path, offline):
    target = write_project(tmp_path / "proj", "1.0.0")
    assert runtimes_install.ensure(target).state == "installed"
    stamp = (target / runtimes_install.STAMP).read_text().strip()
    assert stamp == runtimes_install.lock_hash(tmp_path / "proj" / "package-lock.json")

    # npm ci would delete node_modules and everything in it: a file there survives a skip
    (target / "sentinel").write_text("still here")
    assert runtimes_install.ensure(target).state == "current"
    assert (target / "sentinel").exists()

    write_project(tmp_path / "proj", "1.0.1")  # the lockfile changed: install again
    assert runtimes_install.ensure(target).state == "installed"
    assert not (target / "sentinel").exists()
    assert not (tmp_path / "proj" / ".amux-runtimes-staging").exists()


def test_an_unreachable_registry_keeps_the_runtimes_that_were_there_as_stale(tmp_path,
                                                                              offline):
    """A changed lockfile and no registry: found by one `npm ping` (not npm ci's minute of
    retries), npm's cache tried, and the runtimes of before kept in use, said to be stale."""
    target = write_project(tmp_path / "proj", "1.0.0")
    assert runtimes_install.ensure(target).state == "installed"
    (target / "sentinel").write_text("the runtimes of before")
    before = (target / runtimes_install.STAMP).read_text()

    write_project(tmp_path / "proj", "2.0.0", deps=True)  # needs the registry
    outcome = runtimes_install.ensure(target)
    assert outcome.state == "stale" and outcome.ok
    assert "the npm registry cannot be reached" in outcome.detail
    assert "ECONNREFUSED" in outcome.detail and "stay in use" in outcome.detail
    assert (target / "sentinel").read_text() == "the runtimes of before"
    assert (target / runtimes_install.STAMP).read_text() == before  # retried next start
    assert not (tmp_path / "proj" / ".amux-runtimes-staging").exists()
    ok, said = runtimes_install.status(target)
    assert not ok and said.startswith("stale: installed from an older package-lock.json")


def test_an_unreachable_registry_with_nothing_installed_fails_saying_so(tmp_path, offline):
    target = write_project(tmp_path / "proj", "2.0.0", deps=True)
    outcome = runtimes_install.ensure(target)
    assert outcome.state == "failed" and not outcome.ok
    assert outcome.detail.startswith("the npm registry cannot be reached (")
    assert runtimes_install.status(target) == (
        False, f"not installed in {target} (`make runtimes`)")


class Registry(ThreadingHTTPServer):
    """The npm registry as npm ci and npm ping meet it: `/-/ping` answers, and one tarball
    is served at the address the lockfile resolves it to."""

    def __init__(self, tarball: Path):
        self.tarball = tarball.read_bytes()
        super().__init__(("127.0.0.1", 0), RegistryHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class RegistryHandler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the http.server name
        if self.path.startswith("/-/ping"):
            body, kind = b"{}", "application/json"
        elif self.path == "/amux-probe/-/amux-probe-1.0.0.tgz":
            body, kind = self.server.tarball, "application/octet-stream"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_new_runtimes_are_installed_beside_then_swapped_in_at_the_next_start(
        tmp_path, offline, monkeypatch):
    """While the registry is gone the run keeps the old runtimes; once it is back the new
    ones are installed beside them (nothing in use changes), and the next start swaps them
    in without npm."""
    target = write_project(tmp_path / "proj", "1.0.0")
    assert runtimes_install.ensure(target).state == "installed"
    (target / "sentinel").write_text("in use")
    write_probe_project(tmp_path / "proj")
    lockfile = tmp_path / "proj" / "package-lock.json"
    lock = json.loads(lockfile.read_text())
    tarball = Path(lock["packages"]["node_modules/amux-probe"]["resolved"].removeprefix("file:"))
    registry = Registry(tarball)
    resolved = f"{registry.url}amux-probe/-/amux-probe-1.0.0.tgz"
    lock["packages"]["node_modules/amux-probe"]["resolved"] = resolved
    lock["packages"][""]["dependencies"]["amux-probe"] = "1.0.0"
    lockfile.write_text(json.dumps(lock))
    package = json.loads((tmp_path / "proj" / "package.json").read_text())
    package["dependencies"]["amux-probe"] = "1.0.0"
    (tmp_path / "proj" / "package.json").write_text(json.dumps(package))
    monkeypatch.setenv("npm_config_registry", registry.url)

    assert runtimes_install.install_beside(target).state == "stale"  # not serving yet
    thread = threading.Thread(target=registry.serve_forever, daemon=True)
    thread.start()
    try:
        assert runtimes_install.install_beside(target).state == "installed"
    finally:
        registry.shutdown()
        registry.server_close()
    assert (target / "sentinel").read_text() == "in use"  # nothing running changed
    assert not (target / "amux-probe").exists()
    assert runtimes_install.status(target)[1].endswith("`amux restart` uses them)")

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # the next start needs no npm
    outcome = runtimes_install.ensure(target)
    assert outcome.state == "installed" and "in the background" in outcome.detail
    assert (target / "amux-probe" / "cli.js").exists() and not (target / "sentinel").exists()
    assert runtimes_install.status(target) == (True, f"current ({target})")
    assert not (tmp_path / "proj" / runtimes_install.NEXT).exists()


def test_without_npm_nothing_is_installed_and_nothing_raises(tmp_path, monkeypatch):
    target = write_project(tmp_path / "proj", "1.0.0")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    outcome = runtimes_install.ensure(target)
    assert outcome.state == "failed" and outcome.detail == "npm not found"
    assert not target.exists()


def test_an_install_made_before_stamps_is_adopted_without_npm(tmp_path, monkeypatch):
    target = write_project(tmp_path / "proj", "1.0.0", deps=True)
    (target / "left-pad").mkdir(parents=True)
    # what npm itself records in node_modules after an install
    (target / ".package-lock.json").write_text(json.dumps(
        {"name": "runtimes", "lockfileVersion": 3,
         "packages": {"node_modules/left-pad": LEFT_PAD}}))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no npm needed
    assert runtimes_install.ensure(target).state == "adopted"
    assert runtimes_install.ensure(target).state == "current"
    assert (target / "left-pad").is_dir()


def test_the_runtimes_directory_follows_amux_runtimes_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AMUX_RUNTIMES_DIR", str(tmp_path / "x" / "node_modules"))
    assert runtimes_install.runtimes_dir() == tmp_path / "x" / "node_modules"
    assert runtimes_install.ensure().state == "no-lockfile"
    assert os.listdir(tmp_path) == []


# -- the runtimes are readable and runnable by the runtime users whatever amux's umask ----

RUNTIME_USER = "amux-agent"
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"


def write_probe_project(root: Path) -> Path:
    """A project pinning one real package with a command (`amux-probe`), from a tarball on
    disk (npm installs it with no registry), its lockfile written as npm writes it."""
    src = root.parent / "probe-src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "package.json").write_text(json.dumps(
        {"name": "amux-probe", "version": "1.0.0", "bin": {"amux-probe": "cli.js"}}))
    (src / "cli.js").write_text("#!/bin/sh\necho probe-ran\n")
    (src / "cli.js").chmod(0o755)
    subprocess.run(["npm", "pack", "--silent"], cwd=src, check=True, capture_output=True)
    tarball = src / "amux-probe-1.0.0.tgz"
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()
                                             ).decode()
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(json.dumps(
        {"name": "runtimes", "version": "1.0.0", "private": True,
         "dependencies": {"amux-probe": f"file:{tarball}"}}))
    (root / "package-lock.json").write_text(json.dumps(
        {"name": "runtimes", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
         "packages": {"": {"name": "runtimes", "version": "1.0.0",
                           "dependencies": {"amux-probe": f"file:{tarball}"}},
                      "node_modules/amux-probe": {
                          "version": "1.0.0", "resolved": f"file:{tarball}",
                          "integrity": integrity, "bin": {"amux-probe": "cli.js"}}}}))
    return root / "node_modules"


@pytest.fixture
def umask_077():
    """amux's own umask (settings set it; said here so the test does not depend on it),
    and the runtime user that linux-dac runs the runtimes as."""
    isolation.provision(RUNTIME_USER)
    before = os.umask(0o077)
    yield
    os.umask(before)


def _modes(target: Path) -> dict[str, int]:
    return {str(p.relative_to(target)): p.lstat().st_mode & 0o7777
            for p in [target, *target.rglob("*")] if not p.is_symlink()}


def _assert_open(target: Path) -> None:
    modes = _modes(target)
    assert modes["."] == 0o755
    assert modes["amux-probe/cli.js"] == 0o755  # a command stays a command
    assert modes["amux-probe/package.json"] == 0o644
    assert modes[runtimes_install.STAMP] == 0o644
    assert not [name for name, mode in modes.items() if mode & 0o022]  # owner writes alone


def _run_as_runtime_user(command: Path) -> subprocess.CompletedProcess:
    return subprocess.run([SETPRIV, f"--reuid={RUNTIME_USER}", f"--regid={RUNTIME_USER}",
                           "--clear-groups", str(command)], capture_output=True, text=True,
                          timeout=30)


@as_root
def test_an_install_under_umask_077_is_readable_and_runnable_by_the_runtime_user(
        tmp_path, offline, umask_077):
    target = write_probe_project(tmp_path / "proj")
    reachable(target.parent)  # the checkout itself (a clone under 0700 is doctor's case)
    assert runtimes_install.ensure(target).state == "installed"
    _assert_open(target)
    done = _run_as_runtime_user(target / ".bin" / "amux-probe")
    assert (done.returncode, done.stdout) == (0, "probe-ran\n"), done.stderr

    # an install made before amux opened its trees (npm under umask 077 leaves exactly
    # this) is opened at the next start, without npm
    for entry in [target, *target.rglob("*")]:
        if not entry.is_symlink():
            entry.chmod(0o700 if entry.is_dir() or entry.name == "cli.js" else 0o600)
    (target / "amux-probe" / "package.json").chmod(0o666)  # and its owner's to change alone
    assert _run_as_runtime_user(target / ".bin" / "amux-probe").returncode != 0
    assert runtimes_install.ensure(target).state == "current"
    _assert_open(target)
    assert _run_as_runtime_user(target / ".bin" / "amux-probe").stdout == "probe-ran\n"


@as_root
def test_an_adopted_install_is_opened_too(tmp_path, monkeypatch, umask_077):
    target = write_project(tmp_path / "proj", "1.0.0", deps=True)
    reachable(target.parent)
    (target / "amux-probe").mkdir(parents=True)  # made under umask 077: 0700
    (target / "amux-probe" / "cli.js").write_text("#!/bin/sh\necho probe-ran\n")
    (target / "amux-probe" / "cli.js").chmod(0o700)
    (target / "amux-probe" / "package.json").write_text("{}")
    (target / "amux-probe" / "setuid").write_text("")
    (target / "amux-probe" / "setuid").chmod(0o4700)
    (target / ".package-lock.json").write_text(json.dumps(
        {"name": "runtimes", "lockfileVersion": 3,
         "packages": {"node_modules/left-pad": LEFT_PAD}}))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no npm needed
    assert runtimes_install.ensure(target).state == "adopted"
    _assert_open(target)
    assert (target / "amux-probe" / "setuid").stat().st_mode & 0o7777 == 0o755  # no set-id
    assert _run_as_runtime_user(target / "amux-probe" / "cli.js").stdout == "probe-ran\n"


def test_a_failed_install_still_opens_the_runtimes_it_keeps(tmp_path, offline):
    before = os.umask(0o077)
    try:
        target = write_project(tmp_path / "proj", "1.0.0")
        assert runtimes_install.ensure(target).state == "installed"
        (target / "kept.js").write_text("the runtimes of before")
        for entry in (target, target / "kept.js", target / runtimes_install.STAMP):
            entry.chmod(0o700 if entry.is_dir() else 0o600)  # as an older amux left them
        write_project(tmp_path / "proj", "2.0.0", deps=True)  # needs the registry
        assert runtimes_install.ensure(target).state == "stale"
    finally:
        os.umask(before)
    modes = _modes(target)
    assert (modes["."], modes["kept.js"], modes[runtimes_install.STAMP]) == (
        0o755, 0o644, 0o644)
