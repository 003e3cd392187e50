"""Codex model discovery with the real pinned binary: account first (model/list answers its
bundled list even without a login), paged model/list, every message valid against the
schema the binary generates, nothing guessed when it cannot answer."""

from __future__ import annotations

import json
import subprocess

import pytest
from jsonschema import Draft7Validator

from runtimes import catalog, codex
from runtimes.base import default_runtimes_dir
from runtimes.codex import codex_binary, discover_models
from tests.runtimes.conftest import require_runtime
from tests.support.runtimes import run_async

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def schema_dir(tmp_path_factory):
    require_runtime("codex")
    out = tmp_path_factory.mktemp("codex-schema")
    home = tmp_path_factory.mktemp("codex-home")
    subprocess.run([str(codex_binary(default_runtimes_dir())), "app-server",
                    "generate-json-schema", "--experimental", "--out", str(out)],
                   check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home)})
    return out


def _validate(schema_dir, name, value):
    schema = json.loads((schema_dir / "v2" / f"{name}.json").read_text())
    problems = list(Draft7Validator(schema).iter_errors(value))
    assert not problems, f"{name}: {problems[0].message[:300]}"


def _discover(state_dir, **kwargs):
    wire: list[tuple[str, dict]] = []
    found = run_async(discover_models(state_dir, wire_observer=lambda d, m: wire.append((d, m)),
                                      **kwargs))
    return found, wire


def _answers(wire, method):
    ids = {m["id"] for d, m in wire if d == "out" and m.get("method") == method}
    return [m for d, m in wire if d == "in" and m.get("id") in ids and "method" not in m]


def test_without_a_login_it_answers_not_logged_in_and_lists_nothing(tmp_path, schema_dir):
    found, wire = _discover(tmp_path / "identity")
    assert found.status == catalog.NOT_LOGGED_IN and found.models == ()
    assert "not logged in" in found.message
    (account,) = _answers(wire, "account/read")
    _validate(schema_dir, "GetAccountResponse", account["result"])
    assert account["result"]["account"] is None
    assert not _answers(wire, "model/list")  # its bundled list is not taken as the truth


def test_logged_in_it_follows_every_page_of_model_list(tmp_path, schema_dir, monkeypatch):
    identity = tmp_path / "identity"
    codex_home = identity / "home" / ".codex"
    codex_home.mkdir(parents=True)
    # a real login under the identity's own CODEX_HOME (checked only when a request is sent)
    subprocess.run([str(codex_binary(default_runtimes_dir())), "login", "--with-api-key"],
                   input="sk-test-catalog", text=True, check=True, capture_output=True,
                   timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(identity / "home"),
                                    "CODEX_HOME": str(codex_home)})
    whole, _ = _discover(identity)
    assert whole.status == catalog.OK and len(whole.models) >= 4
    monkeypatch.setattr(codex, "MODEL_PAGE_SIZE", 3)
    paged, wire = _discover(identity)
    pages = _answers(wire, "model/list")
    assert len(pages) >= 2 and all(p["result"].get("nextCursor") for p in pages[:-1])
    for page in pages:
        _validate(schema_dir, "ModelListResponse", page["result"])
    assert [m.ref for m in paged.models] == [m.ref for m in whole.models]
    listed = {m["id"]: m for p in pages for m in p["result"]["data"]}
    for entry in paged.models:
        native = listed[catalog.launch_model(entry.ref)]
        assert entry.display_name == native["displayName"]
        assert list(entry.efforts) == [e["reasoningEffort"]
                                       for e in native["supportedReasoningEfforts"]]
    assert sum(m.is_default for m in paged.models) == 1


def test_a_missing_binary_is_unreachable_and_guesses_nothing(tmp_path):
    found, _ = _discover(tmp_path / "identity", runtimes_dir=tmp_path / "no-runtimes")
    assert found.status == catalog.UNREACHABLE and found.models == ()
    assert "not found" in found.message
