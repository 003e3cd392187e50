"""`amux doctor` checks of the session layer against the real runtimes and a provider."""

from __future__ import annotations

import os

import pytest

from amux_site import runtimes_install
from runtimes import isolation
from sessions import doctor
from sessions.models import ProviderProfile
from tests.support.isolation import as_root

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(240)]


def test_each_runtime_is_installed_with_its_version_and_starts():
    checks = {c.name: c for c in doctor.runtime_checks()}
    assert set(checks) >= {"runtime:codex", "runtime:pi", "runtime:acp", "runtime:claude"}
    for name in ("runtime:codex", "runtime:pi", "runtime:acp", "runtime:claude"):
        assert checks[name].ok, checks[name].detail
        assert checks[name].detail.endswith("starts")
    assert checks["runtime:codex"].detail.startswith("0.171.0")


def test_provider_reachable_and_unreachable(model_server):
    good = ProviderProfile.objects.create(slug="good", platform="openai-compat",
                                          base_url=model_server.base_url)
    bad = ProviderProfile.objects.create(slug="bad", platform="openai-compat",
                                         base_url="http://127.0.0.1:9/v1")
    assert doctor.provider_check(good).ok
    check = doctor.provider_check(bad)
    assert not check.ok and "unreachable" in check.detail


@as_root
def test_runtimes_out_of_the_runtime_users_reach_fail_the_check_until_opened(tmp_path,
                                                                               settings):
    """A clone under root's 0700 home, then an install made under amux's umask 077: each
    fails the check with what to do; opened as `amux run` opens it, it passes."""
    isolation.provision("amux-agent")
    settings.AMUX_ISOLATION, settings.AMUX_RUNTIME_USER = "linux-dac", "amux-agent"
    home = tmp_path / "root-home"
    target = home / "amux" / "node_modules"
    before = os.umask(0o077)
    try:
        (target / "pkg").mkdir(parents=True)
        (target / "pkg" / "cli.js").write_text("#!/bin/sh\n")
        (target / "pkg" / "cli.js").chmod(0o700)
    finally:
        os.umask(before)
    settings.AMUX_RUNTIMES_DIR = target

    check = doctor.runtimes_access_check()
    assert not check.ok
    assert f"{home} is not searchable by 'amux-agent'" in check.detail
    assert f"chmod o+x {home}" in check.detail

    (home).chmod(0o711)
    (home / "amux").chmod(0o711)
    check = doctor.runtimes_access_check()
    assert not check.ok and f"{target} is not readable and searchable" in check.detail

    runtimes_install.open_tree(target)
    check = doctor.runtimes_access_check()
    assert check.ok, check.detail
    assert check.detail == f"{target} readable and runnable by amux-agent"

    (target / "pkg" / "cli.js").chmod(0o757)  # one session could change every session's
    check = doctor.runtimes_access_check()
    assert not check.ok and "cli.js is writable by 'amux-agent'" in check.detail


def test_isolation_check_names_the_backend_and_why(settings):
    """doctor says which backend new sessions get and why; for bwrap whether its probe
    works here (as the runtime user)."""
    settings.AMUX_ISOLATION = "private-home"
    check = doctor.isolation_check()
    assert check.ok and check.detail.startswith("private-home") and \
        "AMUX_ISOLATION=private-home" in check.detail
    settings.AMUX_ISOLATION = ""
    check = doctor.isolation_check()
    if os.geteuid() != 0:
        assert check.detail.startswith("private-home") and "not run as root" in check.detail
        return
    isolation.provision("amux-agent")
    reason = isolation.auto_reason("amux-agent")
    if reason is None:
        assert check.ok and check.detail.startswith("bwrap:") and "probe works" in check.detail
        assert "amux runs as root and the bwrap probe succeeded" in check.detail
    else:
        assert check.detail.startswith("linux-dac") and reason in check.detail
    settings.AMUX_ISOLATION = "bwrap"
    check = doctor.isolation_check()
    assert check.detail.startswith("bwrap") and "AMUX_ISOLATION=bwrap" in check.detail
    assert check.ok == (reason is None)


@as_root
def test_under_linux_dac_the_isolation_check_says_whether_the_loopback_is_fenced(settings):
    from runtimes import loopback_fence

    isolation.provision("amux-agent")
    settings.AMUX_ISOLATION, settings.AMUX_RUNTIME_USER = "linux-dac", "amux-agent"
    problem = loopback_fence.problem()
    check = doctor.isolation_check()
    if problem is None:
        assert check.ok and "loopback fenced (amux's port and DNS only)" in check.detail
    else:
        assert not check.ok and problem in check.detail and "reachable" in check.detail
    settings.AMUX_LOOPBACK_FENCE = "off"
    check = doctor.isolation_check()
    assert not check.ok and not check.required
    assert "loopback open to runtimes (AMUX_LOOPBACK_FENCE=off)" in check.detail
