"""The panel's model picker on the agent settings page and the provider form's model list
with display names and efforts."""

from __future__ import annotations

import pytest

from sessions.models import ProviderProfile

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(240)]


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


def test_agent_settings_asks_the_catalog_for_the_worker_model(op, openai_provider,
                                                               session_dirs):
    page = op.get("/panel/settings/agents/").content.decode()
    assert 'list="worker-model-options"' in page and "/panel/model-options/" in page
    native = op.get("/panel/model-options/?list=worker-model-options&worker_runtime=codex"
                    "&worker_provider=").content.decode()
    assert 'data-catalog-status="not_logged_in"' in native and "not logged in" in native
    assert "<option" not in native and "kept as it is" in native
    openai_provider.model_names = ["gpt-5.5", {"name": "deep", "display_name": "Deep one",
                                               "efforts": ["high"]}]
    openai_provider.save()
    bound = op.get("/panel/model-options/?list=worker-model-options&worker_runtime=codex"
                   f"&worker_provider={openai_provider.pk}").content.decode()
    assert '<option value="deep">Deep one — efforts: high</option>' in bound
    assert '<option value="gpt-5.5">gpt-5.5</option>' in bound


def test_model_options_take_the_provider_slug(op, openai_provider, session_dirs):
    openai_provider.model_names = [{"name": "deep", "display_name": "Deep one",
                                    "efforts": ["high"]}]
    openai_provider.save()
    html = op.get("/panel/model-options/?runtime=codex&provider=scripted").content.decode()
    assert '<option value="deep">Deep one — efforts: high</option>' in html
    assert "1 model in the provider catalog" in html


def test_provider_form_keeps_display_names_and_efforts(op, openai_provider):
    response = op.post("/panel/providers/scripted/", {
        "platform": "openai-compat", "base_url": openai_provider.base_url,
        "models_text": "gpt-5.5\ndeep | Deep one | low, high\n"})
    assert response.status_code in (200, 302), response.content[:500]
    provider = ProviderProfile.objects.get(slug="scripted")
    assert provider.model_names == ["gpt-5.5", {"name": "deep", "display_name": "Deep one",
                                                "efforts": ["low", "high"]}]
    form = op.get("/panel/providers/scripted/").content.decode()
    assert "deep | Deep one | low, high" in form
    assert "gpt-5.5, deep" in op.get("/panel/providers/").content.decode()
    bad = op.post("/panel/providers/scripted/", {
        "platform": "openai-compat", "base_url": openai_provider.base_url,
        "models_text": "a\na\n"})
    assert "listed twice" in bad.content.decode()
    assert ProviderProfile.objects.get(slug="scripted").model_names[0] == "gpt-5.5"
