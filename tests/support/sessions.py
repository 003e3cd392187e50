"""Fixtures for session-layer tests: a provider pointed at the scripted model server (behind
amux's model gateway), a private data directory, and helpers to drive a session host in
this process."""

from __future__ import annotations

import contextlib
import time

import pytest

from tests.support.model_server import ModelServer


@contextlib.contextmanager
def gateway_served(settings, monkeypatch=None):
    """amux's ASGI app (its model gateway) under uvicorn in this process, as settings.AMUX_URL
    (and, with `monkeypatch`, the AMUX_URL of worker processes the test starts): a session's
    runtime reaches its provider only there. The gateway reads the session's credential
    from the database on threads of its own, so such a test uses
    `django_db(transaction=True)`; their connections are closed with it."""
    from sessions.gateway_threads import lookups
    from tests.support.asgi_thread import AsgiThread

    try:
        with AsgiThread() as amux:
            settings.AMUX_URL = amux.url
            if monkeypatch is not None:
                monkeypatch.setenv("AMUX_URL", amux.url)
            yield amux
    finally:
        lookups.close()


def session_tokens(session) -> int:
    from sessions.models import UsageDay

    return sum(UsageDay.objects.filter(session=session).values_list("tokens", flat=True))


def wait_for_tokens(session, expected: int, timeout: float = 10) -> None:
    """The gateway counts a request's tokens once its answer has been passed back, off the
    answer's path: a runtime may end its turn a moment before the count is written."""
    deadline = time.monotonic() + timeout
    while session_tokens(session) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session_tokens(session) == expected


@pytest.fixture
def model_server(settings, monkeypatch):
    """The scripted provider, behind amux's model gateway (`gateway_served`; a session host
    the test starts in a process of its own finds the gateway through AMUX_URL)."""
    with ModelServer() as server, gateway_served(settings, monkeypatch):
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
