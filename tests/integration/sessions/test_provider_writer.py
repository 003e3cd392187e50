"""Model provider profiles have one writer (sessions/provider_actions.py, issue 31): the
REST API, the panel's form and the admin refuse the same faults in the same words, a
provider's slug is fixed once made, and one still in use is never deleted (a goal's agent
used to make the API answer 500)."""

from __future__ import annotations

import pytest
from django.test import Client

from goals.models import Agent, Goal
from sessions.models import ProviderProfile

pytestmark = pytest.mark.django_db

ARK = "https://ark.cn-beijing.volces.com/api/coding/v3"  # a template's route: key required
GOOD = {"slug": "gw", "platform": "openai-compat", "base_url": "http://127.0.0.1:9/v1"}


@pytest.fixture
def panel(operator):
    client = Client()
    client.force_login(operator)
    return client


def api_faults(response) -> dict[str, str]:
    assert response.status_code == 400, response.content
    return {field: messages[0] for field, messages in
            response.json()["error"]["fields"].items()}


def panel_faults(response) -> dict[str, str]:
    assert response.status_code == 400, response.content
    return {field: errors[0] for field, errors in response.context["form"].errors.items()}


@pytest.mark.parametrize("body, field", [
    ({**GOOD, "base_url": ARK}, "api_key"),  # the plan's key from the start
    ({**GOOD, "api_key": "sk-ü"}, "api_key"),  # not sendable in a header
    ({**GOOD, "slug": "taken"}, "slug"),
    ({**GOOD, "models": ["a", "a"]}, "models"),
    # a display name too long is refused, never cut short
    ({**GOOD, "models": [{"name": "a", "display_name": "x" * 121}]}, "models"),
])
def test_the_api_and_the_panel_refuse_a_new_provider_in_the_same_words(api, panel, body,
                                                                        field):
    ProviderProfile.objects.create(slug="taken", platform="openai-compat",
                                   base_url="http://127.0.0.1:9/v1")
    by_api = api_faults(api.post("/api/v1/providers/", body, format="json"))
    form = {**body, "models_text": "\n".join(
        m if isinstance(m, str) else f"{m['name']} | {m['display_name']}"
        for m in body.get("models", []))}
    form.pop("models", None)
    by_panel = panel_faults(panel.post("/panel/providers/new/", form))
    panel_field = "models_text" if field == "models" else field
    assert by_api[field] == by_panel[panel_field], (by_api, by_panel)
    assert ProviderProfile.objects.count() == 1  # nothing half-written


def test_a_slug_is_fixed_once_made_and_a_stored_key_keeps_a_plan_route_valid(api, panel):
    made = api.post("/api/v1/providers/", {**GOOD, "api_key": "sk-one"}, format="json")
    assert made.status_code == 201, made.content
    renamed = api_faults(api.patch("/api/v1/providers/gw/", {"slug": "other"},
                                   format="json"))
    assert renamed == {"slug": "is fixed once made: sessions, tasks and settings refer to it"}
    # the stored key counts for the template's route, through either door
    moved = api.patch("/api/v1/providers/gw/", {"base_url": ARK + "/"}, format="json")
    assert moved.status_code == 200 and moved.json()["base_url"] == ARK
    cleared = panel.post("/panel/providers/gw/", {
        "platform": "openai-compat", "base_url": ARK, "models_text": "", "clear_key": "on"})
    assert panel_faults(cleared) == {"api_key": "a Ark Agent Plan profile needs its api_key"}
    stored = ProviderProfile.objects.get()
    assert (stored.slug, stored.base_url, stored.secrets) == ("gw", ARK, {"api_key": "sk-one"})


def test_a_provider_in_use_is_kept_and_the_refusal_names_its_user(api):
    provider = ProviderProfile.objects.create(slug="gw", platform="openai-compat",
                                              base_url="http://127.0.0.1:9/v1")
    goal = Goal.objects.create(slug="ship", title="Ship")
    Agent.objects.create(goal=goal, slug="builder", mode="managed_agent_runtime",
                         provider=provider)
    refused = api.delete("/api/v1/providers/gw/")
    assert refused.status_code == 409, refused.content
    assert refused.json()["error"]["code"] == "in_use"
    assert "agents" in refused.json()["error"]["message"]
    assert ProviderProfile.objects.filter(slug="gw").exists()
    Agent.objects.all().delete()
    assert api.delete("/api/v1/providers/gw/").status_code == 204
    assert not ProviderProfile.objects.exists()


def test_the_admin_saves_through_the_writer(panel, operator):
    operator.is_superuser = True
    operator.save()
    refused = panel.post("/admin/agent_sessions/providerprofile/add/", {
        "slug": "ark", "platform": "openai-compat", "base_url": ARK, "models_text": "",
        "api_key": ""})
    assert refused.status_code == 200  # the admin shows its form again, with the fault
    assert "a Ark Agent Plan profile needs its api_key" in refused.content.decode()
    saved = panel.post("/admin/agent_sessions/providerprofile/add/", {
        "slug": "ark", "platform": "openai-compat", "base_url": ARK + "/",
        "models_text": "plan-a", "api_key": "sk-plan"})
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    stored = ProviderProfile.objects.get()
    assert (stored.base_url, stored.model_names, stored.secrets) == (
        ARK, ["plan-a"], {"api_key": "sk-plan"})


def test_a_field_the_form_refuses_itself_is_named_once(panel):
    """A field that fails its own check (no URL, no such platform) is not told a second
    time by the writer that it is required."""
    response = panel.post("/panel/providers/new/", {
        "slug": "gw", "platform": "mystery", "base_url": "not a url", "models_text": ""})
    errors = response.context["form"].errors
    assert response.status_code == 400
    assert len(errors["base_url"]) == 1 and len(errors["platform"]) == 1, errors
    assert not ProviderProfile.objects.exists()
