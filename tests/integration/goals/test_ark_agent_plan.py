"""The Ark Agent Plan provider template: a preset to start a profile from, recognised by its
route; its profile keeps its own model list and fails closed without its key — for
sessions, agents and the explicit provider/model rebinding of a managed agent."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions.models import ProviderProfile, Session
from tests.integration.goals.conftest import add_agent

pytestmark = pytest.mark.django_db

ARK = "https://ark.cn-beijing.volces.com/api/coding/v3"


def fields(response):
    return response.json()["error"]["fields"]


@pytest.fixture
def ark(api):
    response = api.post("/api/v1/providers/", {
        "slug": "ark", "platform": "openai-compat", "base_url": ARK,
        "api_key": "ark-test-key", "models": ["plan-model-a", "plan-model-b"]})
    assert response.status_code == 201, response.content
    return response.json()


def test_the_template_is_a_preset_to_start_from(api, operator):
    listed = api.get("/api/v1/provider-templates/").json()
    (ark,) = [t for t in listed["results"] if t["id"] == "ark-agent-plan"]
    assert (ark["name"], ark["platform"], ark["base_url"], ark["key_field"]) == (
        "Ark Agent Plan", "openai-compat", ARK, "api_key")
    assert ark["own_models"] is True and ark["models"] == []
    client = Client()
    client.force_login(operator)
    page = client.get("/panel/providers/new/?template=ark-agent-plan").content.decode()
    assert f'value="{ARK}"' in page and "Ark Agent Plan" in page


def test_a_plan_profile_needs_its_key_from_the_start(api):
    missing = api.post("/api/v1/providers/", {"slug": "ark", "platform": "openai-compat",
                                              "base_url": ARK, "models": ["plan-model-a"]})
    assert missing.status_code == 400 and "api_key" in fields(missing)
    assert not ProviderProfile.objects.exists()
    # the standard Ark route is another route: no plan boundary
    standard = api.post("/api/v1/providers/", {
        "slug": "ark-standard", "platform": "openai-compat",
        "base_url": "https://ark.cn-beijing.volces.com/api/v3"})
    assert standard.status_code == 201 and standard.json()["template"] is None


def test_a_model_outside_the_plan_is_refused_naming_model(api, ark, goal, session_dirs):
    assert ark["template"] == "ark-agent-plan"
    refused = api.post("/api/v1/goals/ship/agents/", {
        "slug": "builder", "mode": "managed_agent_runtime", "provider": "ark",
        "model": "gpt-5.5"})
    assert refused.status_code == 400 and "model" in fields(refused)
    assert "plan-model-a" in fields(refused)["model"][0]
    session = api.post("/api/v1/sessions/", {"runtime": "pi", "provider": "ark",
                                             "model": "doubao-standard-route-model"})
    assert session.status_code == 400 and "model" in fields(session)
    assert not Session.objects.exists()
    add_agent(api, "builder", provider="ark", model="plan-model-a")


def test_without_its_key_a_plan_profile_starts_nothing(api, ark, goal, session_dirs):
    add_agent(api, "builder", provider="ark", model="plan-model-a")
    profile = ProviderProfile.objects.get(slug="ark")
    profile.secrets = {}
    profile.save()
    started = api.post("/api/v1/goals/ship/agents/builder/start/")
    assert started.status_code == 400 and "api_key" in fields(started)
    assert not Session.objects.exists()
    assert api.get("/api/v1/goals/ship/agents/builder/").json()["session"] is None


def test_provider_and_model_change_only_by_explicit_rebinding(api, ark, goal,
                                                              openai_provider, session_dirs):
    add_agent(api, "builder", provider="scripted", model="gpt-5.5")
    api.post("/api/v1/goals/ship/agents/builder/start/")
    url = "/api/v1/goals/ship/agents/builder/provider/"
    bound = api.post(url, {"provider": "ark", "model": "plan-model-a"})
    assert bound.status_code == 409 and "provider" in fields(bound)
    api.post("/api/v1/goals/ship/agents/builder/detach/")
    outside = api.post(url, {"provider": "ark", "model": "gpt-5.5"})
    assert outside.status_code == 400 and "model" in fields(outside)
    unknown = api.post(url, {"provider": "nope", "model": "x"})
    assert unknown.status_code == 400 and "provider" in fields(unknown)
    agent = api.get("/api/v1/goals/ship/agents/builder/").json()
    assert (agent["provider"], agent["model"]) == ("scripted", "gpt-5.5")  # unchanged
    moved = api.post(url, {"provider": "ark", "model": "plan-model-b"})
    assert moved.status_code == 200
    assert (moved.json()["provider"], moved.json()["model"]) == ("ark", "plan-model-b")
