"""The Codex goal capability comes from the running app-server's ``thread/goal/get``: on
with the pinned binary's defaults, off when the feature is switched off at launch."""

from __future__ import annotations

import pytest

from tests.runtimes.conftest import require_runtime
from tests.support.runtimes import adapter_for, assert_no_leak, make_config, run_async

pytestmark = pytest.mark.timeout(120)


def _probe(tmp_path, model_server, **overrides):
    require_runtime("codex")
    cfg = make_config("codex", tmp_path, model_server.base_url, **overrides)

    async def main():
        adapter = adapter_for("codex", cfg)
        try:
            await adapter.start()
            return adapter, adapter.goals_supported, adapter.facts()
        finally:
            await adapter.close()

    adapter, supported, facts = run_async(main())
    assert_no_leak([adapter.tag])
    return supported, facts


def test_goal_feature_probed_on(tmp_path, model_server):
    supported, facts = _probe(tmp_path, model_server)
    assert (supported, facts["goals"]) == (True, True)


def test_goal_feature_switched_off_means_no_goals(tmp_path, model_server):
    supported, facts = _probe(tmp_path, model_server,
                              extra_args=("-c", "features.goals=false"))
    assert (supported, facts["goals"]) == (False, False)
