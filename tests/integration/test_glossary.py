"""The glossary names the words the panel and the API use, and the Prompts page and the
documentation (docs/policy-and-prompts.md) say the same about when a prompt is read."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
TERMS = ["goal", "agent", "connector", "expert", "launch-preset", "task", "instance",
         "schedule", "provider", "runtime", "turn", "session", "mandate"]


def test_the_glossary_defines_the_execution_and_goal_terms(client, viewer):
    client.force_login(viewer)
    page = client.get("/panel/glossary/").content.decode()
    missing = [t for t in TERMS if f'<dt id="{t}">' not in page]
    assert not missing


def test_the_prompts_page_and_the_docs_agree_that_every_model_request_reads_the_latest(
        client, viewer):
    client.force_login(viewer)
    page = client.get("/panel/prompts/").content.decode()
    docs = (ROOT / "docs" / "policy-and-prompts.md").read_text()
    assert "latest version on every model request" in page
    assert "Every model request reads the latest version — each step of a turn too" in docs
    assert "reaches the next turn" not in docs  # the old per-turn wording
