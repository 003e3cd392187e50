"""The worker's command directory and gitconfig (seed 002's setup)."""

from __future__ import annotations

import subprocess

import pytest

from tickets.tools.amux_cli import without_directory
from tickets.tools.worker_bin import (
    WorkerSetupError,
    check_disabled,
    gitconfig_text,
    install_worker_bin,
)


def test_the_command_directory_holds_amux_and_its_shims(tmp_path):
    install_worker_bin(tmp_path)
    install_worker_bin(tmp_path)  # idempotent
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "amux", "gh", "git-credential-amux", "lark-cli"]
    assert all(p.stat().st_mode & 0o111 for p in tmp_path.iterdir())


@pytest.mark.parametrize("name", ["git", "python3", ".hidden"])
def test_a_file_amux_did_not_write_fails_the_setup_naming_it(tmp_path, name):
    install_worker_bin(tmp_path)
    (tmp_path / name).write_text("#!/bin/sh\n")
    with pytest.raises(WorkerSetupError, match=name):
        install_worker_bin(tmp_path)


def test_a_symlinked_command_is_refused(tmp_path):
    install_worker_bin(tmp_path)
    (tmp_path / "gh").unlink()
    (tmp_path / "gh").symlink_to("/usr/bin/env")
    with pytest.raises(WorkerSetupError, match="gh"):
        install_worker_bin(tmp_path)


def test_the_gitconfig_uses_amux_for_credentials_and_https_for_ssh_remotes(tmp_path):
    text = gitconfig_text(tmp_path, ["ghe.example.com"], lfs=False)
    assert "\thelper =\n" in text  # clears any helper configured before
    assert f"\thelper = {tmp_path / 'git-credential-amux'}\n" in text
    for host in ("github.com", "ghe.example.com"):
        assert f'[url "https://{host}/"]\n\tinsteadOf = git@{host}:\n' in text
        assert f"insteadOf = ssh://git@{host}/" in text
    assert "lfs" not in text
    assert "[filter \"lfs\"]" in gitconfig_text(tmp_path, lfs=True)


def test_a_disabled_command_fails_naming_the_setting_until_it_is_enabled_again(tmp_path):
    install_worker_bin(tmp_path, disabled=["curl", "ssh"])
    run = subprocess.run([str(tmp_path / "curl"), "https://example.com"],
                         capture_output=True, text=True)
    assert run.returncode == 126
    assert "curl is disabled for amux workers" in run.stderr
    assert "Agent settings" in run.stderr
    install_worker_bin(tmp_path, disabled=["ssh"])  # curl enabled again: its shim goes
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "amux", "gh", "git-credential-amux", "lark-cli", "ssh"]


def test_a_file_posing_as_a_disabled_shim_is_still_foreign(tmp_path):
    install_worker_bin(tmp_path, disabled=["curl"])
    (tmp_path / "curl").write_text("#!/bin/sh\n# amux: a disabled command\nexec /usr/bin/curl\n")
    with pytest.raises(WorkerSetupError, match="curl"):
        install_worker_bin(tmp_path, disabled=["curl"])


@pytest.mark.parametrize(("names", "problem"), [
    (["gh"], "amux provides these itself: gh"),
    (["lark-cli", "amux"], "amux provides these itself: amux, lark-cli"),
    (["../bin/sh", "a b", ""], "not a command name: ../bin/sh, a b, "),
])
def test_only_plain_names_of_other_commands_can_be_disabled(tmp_path, names, problem):
    with pytest.raises(ValueError, match=problem.replace("+", r"\+")):
        check_disabled(names)
    with pytest.raises(ValueError):
        install_worker_bin(tmp_path, disabled=names)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_what_a_shim_runs_does_not_find_the_shims(tmp_path):
    bin_dir = tmp_path / "worker-bin"
    path = f"{bin_dir}:/usr/local/bin:{bin_dir}/:/usr/bin"
    assert without_directory(path, str(bin_dir)) == "/usr/local/bin:/usr/bin"
