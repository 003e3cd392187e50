"""`amux doctor` checks of the session layer against the real runtimes and a provider."""

from __future__ import annotations

import pytest

from sessions import doctor
from sessions.models import ProviderProfile

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
