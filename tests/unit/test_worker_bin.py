"""The worker's command directory and gitconfig (seed 002's setup)."""

from __future__ import annotations

import pytest

from tickets.tools.worker_bin import (
    WorkerSetupError,
    gitconfig_text,
    install_worker_bin,
)


def test_the_command_directory_holds_amux_and_its_two_shims(tmp_path):
    install_worker_bin(tmp_path)
    install_worker_bin(tmp_path)  # idempotent
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amux", "gh", "git-credential-amux"]
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
