"""An Ark Agent Plan profile and its route's discovered models: once probed, a model the
latest ok probe did not discover is refused (``model_not_discovered``) even when the
operator lists it; never probed, the operator's list decides and the refusal says the
route is unprobed. The plan route is the scripted model server here
(settings.PROVIDER_TEMPLATE_ROUTES), reached over real HTTP."""

from __future__ import annotations

import pytest

from sessions.models import ProviderProfile, Session
from tests.integration.goals.conftest import add_agent

pytestmark = pytest.mark.django_db

KEY = "ark-plan-secret-key-77"


def error(response):
    return response.json()["error"]


@pytest.fixture
def ark(api, settings, model_server):
    model_server.api_key = KEY
    model_server.models = ["plan-model-a", "plan-model-c"]
    settings.PROVIDER_TEMPLATE_ROUTES = {"ark-agent-plan": model_server.base_url}
    response = api.post("/api/v1/providers/", {
        "slug": "ark", "platform": "openai-compat", "base_url": model_server.base_url,
        "api_key": KEY, "models": ["plan-model-a", "plan-model-b"]})
    assert response.status_code == 201, response.content
    assert response.json()["template"] == "ark-agent-plan"
    return response.json()


def _agent(api, slug, model):
    return api.post("/api/v1/goals/ship/agents/", {
        "slug": slug, "mode": "managed_agent_runtime", "provider": "ark", "model": model})


def test_unprobed_the_operator_list_decides_and_says_so(api, ark, goal, session_dirs):
    refused = _agent(api, "builder", "gpt-5.5")
    assert refused.status_code == 400
    assert error(refused)["code"] == "model_not_in_plan"
    assert "unprobed" in error(refused)["fields"]["model"][0]
    add_agent(api, "builder", provider="ark", model="plan-model-b")  # listed, unknown
    page = api.get("/api/v1/providers/ark/").json()
    assert page["capabilities"] is None


def test_a_model_the_probe_did_not_discover_is_refused(api, ark, goal, session_dirs,
                                                       model_server, operator):
    snap = api.post("/api/v1/providers/ark/probe").json()
    assert snap["ok"] is True and [m["id"] for m in snap["models"]] == [
        "plan-model-a", "plan-model-c"]
    refused = _agent(api, "builder", "plan-model-b")
    assert refused.status_code == 400
    assert error(refused)["code"] == "model_not_discovered"
    assert "model" in error(refused)["fields"]
    assert "'plan-model-b'" in error(refused)["message"] and "revision 1" in error(
        refused)["message"]
    session = api.post("/api/v1/sessions/", {"runtime": "pi", "provider": "ark",
                                             "model": "plan-model-b"})
    assert session.status_code == 400 and error(session)["code"] == "model_not_discovered"
    assert not Session.objects.exists()
    # discovered but not listed by the operator: still refused (discovery adds nothing)
    unlisted = _agent(api, "builder", "plan-model-c")
    assert error(unlisted)["code"] == "model_not_in_plan"
    assert ProviderProfile.objects.get(slug="ark").model_names == [
        "plan-model-a", "plan-model-b"]
    add_agent(api, "builder", provider="ark", model="plan-model-a")
    # a later failed probe is no evidence: the last ok one still decides
    model_server.api_key = "ark-rotated"
    failed = api.post("/api/v1/providers/ark/probe").json()
    assert (failed["revision"], failed["outcome"]) == (2, "not_authenticated")
    assert error(_agent(api, "second", "plan-model-b"))["code"] == "model_not_discovered"
    # the panel says which listed model the route did not discover
    from django.test import Client

    op = Client()
    op.force_login(operator)
    page = op.get("/panel/providers/").content.decode()
    assert 'data-undiscovered="ark"' in page and "not discovered: plan-model-b" in page
    # once the route lists it (a later ok probe), it is usable
    model_server.api_key = KEY
    model_server.models = ["plan-model-a", "plan-model-b"]
    assert api.post("/api/v1/providers/ark/probe").json()["revision"] == 3
    add_agent(api, "second", provider="ark", model="plan-model-b")
    for answer in (snap, failed, api.get("/api/v1/providers/ark/").json()):
        assert KEY not in str(answer)


def test_evidence_of_another_route_is_no_evidence(api, ark, goal, session_dirs, settings):
    """A probe stands for the route it asked: the profile moved to another plan route (a
    second stand-in server), its models are unknown again until that route is probed."""
    from tests.support.model_server import ModelServer

    api.post("/api/v1/providers/ark/probe")
    assert error(_agent(api, "builder", "plan-model-b"))["code"] == "model_not_discovered"
    with ModelServer(api_key=KEY) as moved:
        moved.models = ["plan-model-a"]
        settings.PROVIDER_TEMPLATE_ROUTES = {"ark-agent-plan": moved.base_url}
        changed = api.patch("/api/v1/providers/ark/", {"base_url": moved.base_url})
        assert changed.status_code == 200 and changed.json()["template"] == "ark-agent-plan"
        refused = _agent(api, "builder", "gpt-5.5")
        assert "unprobed" in error(refused)["fields"]["model"][0]
        add_agent(api, "builder", provider="ark", model="plan-model-b")
        snap = api.post("/api/v1/providers/ark/probe").json()
        assert (snap["revision"], snap["base_url"]) == (2, moved.base_url)
        assert error(_agent(api, "other", "plan-model-b"))["code"] == "model_not_discovered"
