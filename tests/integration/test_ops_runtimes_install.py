"""The agent runtimes are installed once per lockfile, with real npm: unchanged lockfile →
no install and no registry; a failed install keeps what was there and never raises."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from amux_site import runtimes_install

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


def test_a_failed_install_keeps_the_runtimes_that_were_there_and_says_why(tmp_path,
                                                                           offline):
    target = write_project(tmp_path / "proj", "1.0.0")
    assert runtimes_install.ensure(target).state == "installed"
    (target / "sentinel").write_text("the runtimes of before")
    before = (target / runtimes_install.STAMP).read_text()

    write_project(tmp_path / "proj", "2.0.0", deps=True)  # needs the registry
    outcome = runtimes_install.ensure(target)
    assert outcome.state == "failed" and not outcome.ok
    assert "npm ci exited" in outcome.detail and "ECONNREFUSED" in outcome.detail
    assert (target / "sentinel").read_text() == "the runtimes of before"
    assert (target / runtimes_install.STAMP).read_text() == before  # retried next start
    assert not (tmp_path / "proj" / ".amux-runtimes-staging").exists()


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
