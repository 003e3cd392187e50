"""Fixtures for session-layer tests: a provider pointed at the scripted model server, a
private data directory, and helpers to drive a session host in this process."""

from __future__ import annotations

import time

import pytest

from tests.support.model_server import ModelServer


@pytest.fixture
def model_server():
    with ModelServer() as server:
        yield server


@pytest.fixture
def session_dirs(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = tmp_path / "data" / "work"
    settings.WORK_DIR.mkdir(parents=True)
    from tests.support.isolation import reachable

    reachable(settings.WORK_DIR)
    return settings.DATA_DIR


@pytest.fixture
def openai_provider(db, model_server):
    from sessions.models import ProviderProfile

    provider = ProviderProfile.objects.create(slug="scripted", platform="openai-compat",
                                              base_url=model_server.base_url,
                                              model_names=["gpt-5.5"])
    provider.secrets = {"api_key": "sk-test-secret"}
    provider.save()
    return provider


@pytest.fixture
def anthropic_provider(db, model_server):
    """The same scripted server as an Anthropic-compatible provider (Claude)."""
    from sessions.models import ProviderProfile

    provider = ProviderProfile.objects.create(slug="scripted", platform="anthropic-compat",
                                              base_url=model_server.root_url,
                                              model_names=["claude-sonnet-4-5"])
    provider.secrets = {"api_key": "sk-ant-test-secret"}
    provider.save()
    return provider


def run_host(session_id: int, **kwargs) -> str:
    from sessions.host import SessionHost
    from tests.support.runtimes import run_async

    return run_async(SessionHost(session_id, **kwargs).run())


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not reached")
