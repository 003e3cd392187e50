from __future__ import annotations

import shutil

import pytest

from runtimes import get_adapter
from tests.support.model_server import ModelServer


@pytest.fixture
def model_server():
    with ModelServer() as server:
        yield server


def require_runtime(name: str) -> None:
    probe = get_adapter(name).probe()
    if not probe.installed:
        message = f"runtime {name} not installed: {probe.error}"
        # `make test` installs the runtimes wherever npm exists: missing there is a failure,
        # not a gap to skip past. Only a machine without npm (Node is optional) skips.
        if shutil.which("npm"):
            pytest.fail(message + " (run `make runtimes`)")
        pytest.skip(message + " (no npm on this machine)")
