from __future__ import annotations

import pytest

from sessions.runtimes import get_adapter
from tests.support.model_server import ModelServer


@pytest.fixture
def model_server():
    with ModelServer() as server:
        yield server


def require_runtime(name: str) -> None:
    probe = get_adapter(name).probe()
    if not probe.installed:
        pytest.skip(f"runtime {name} not installed: {probe.error}")
