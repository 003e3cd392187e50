"""Provider keys are checked on save (they travel in an HTTP header), in the API and the
admin; `amux doctor` reports a key stored before that check on its own line."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from amux_site.doctor import settle
from sessions import doctor as session_doctor
from sessions.keys import api_key_problem
from sessions.models import ProviderProfile
from sessions.provider_form import ProviderForm
from tests.support.sessions import model_server  # noqa: F401

pytestmark = pytest.mark.django_db

GOOD = {"slug": "gw", "platform": "openai-compat", "base_url": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("key", ["sk-ünicode", "sk-\u00a0x", "sk-a b", "sk-\nInjected: 1",
                                 "sk-“quoted”", "sk-\x7f"])
def test_a_key_that_is_no_http_header_value_is_refused_naming_api_key(api, key):
    response = api.post("/api/v1/providers/", {**GOOD, "api_key": key}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert set(error["fields"]) == {"api_key"}
    assert "HTTP header" in error["fields"]["api_key"][0]
    assert not ProviderProfile.objects.exists()


def test_a_valid_key_is_kept_without_surrounding_whitespace_and_an_update_is_checked(api):
    response = api.post("/api/v1/providers/", {**GOOD, "api_key": "  sk-Abc_123.~+/=  \n"},
                        format="json")
    assert response.status_code == 201, response.content
    assert ProviderProfile.objects.get().secrets["api_key"] == "sk-Abc_123.~+/="
    refused = api.patch("/api/v1/providers/gw/", {"api_key": "sk-é"}, format="json")
    assert refused.status_code == 400 and "api_key" in refused.json()["error"]["fields"]
    assert ProviderProfile.objects.get().secrets["api_key"] == "sk-Abc_123.~+/="


def test_problem_names_the_character_and_its_position():
    assert api_key_problem("sk-abc") is None
    assert api_key_problem("") is None
    assert "U+00E9 at position 5" in api_key_problem("sk-aé")


def test_admin_form_has_a_write_only_key_field_checked_on_save():
    bad = ProviderForm(data={**GOOD, "api_key": "sk-ü", "models_text": ""})
    assert not bad.is_valid() and "api_key" in bad.errors
    good = ProviderForm(data={**GOOD, "api_key": "sk-good", "models_text": ""})
    assert good.is_valid(), good.errors
    profile = good.save()
    assert profile.secrets == {"api_key": "sk-good"}
    # empty keeps the stored key; the field never renders it back
    edit = ProviderForm(data={**GOOD, "api_key": "", "models_text": ""},
                               instance=profile)
    assert edit.is_valid(), edit.errors
    assert edit.save().secrets == {"api_key": "sk-good"}
    assert "sk-good" not in str(ProviderForm(instance=profile))


def test_admin_add_page_refuses_a_non_ascii_key(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="root-pass-123")
    client.force_login(admin)
    page = client.post("/admin/agent_sessions/providerprofile/add/",
                       {**GOOD, "api_key": "sk-ü", "models_text": ""})
    assert page.status_code == 200 and "HTTP header" in page.content.decode()
    assert not ProviderProfile.objects.exists()
    saved = client.post("/admin/agent_sessions/providerprofile/add/",
                        {**GOOD, "api_key": "sk-ok", "models_text": ""})
    assert saved.status_code == 302
    assert ProviderProfile.objects.get().secrets == {"api_key": "sk-ok"}


def test_doctor_reports_a_stored_bad_key_and_still_checks_the_others(model_server):  # noqa: F811
    # stored before keys were checked on save
    ProviderProfile.objects.create(slug="broken", platform="openai-compat",
                                   base_url=model_server.base_url,
                                   secrets={"api_key": "sk-ünicode"})
    ProviderProfile.objects.create(slug="fine", platform="openai-compat",
                                   base_url=model_server.base_url,
                                   secrets={"api_key": "sk-ok"})
    items = list(session_doctor.checks())
    assert {item.name for item in items} >= {"runtime:codex", "runtime:pi",
                                             "provider:broken", "provider:fine"}
    checks = {c.name: c for c in (settle(i) for i in items if i.name.startswith("provider:"))}
    assert not checks["provider:broken"].ok
    assert "unusable api_key" in checks["provider:broken"].detail
    assert "U+00FC" in checks["provider:broken"].detail
    assert checks["provider:fine"].ok, checks["provider:fine"].detail


def test_doctor_lists_every_line_even_when_a_provider_check_raises(capsys,
                                                                   settings):
    # a row stored before base URLs were validated: its check raises (ValueError) for real
    ProviderProfile.objects.create(slug="a", platform="openai-compat",
                                   base_url="http://[::1/v1")
    ProviderProfile.objects.create(slug="b", platform="openai-compat",
                                   base_url="http://127.0.0.1:9/v1")
    with pytest.raises(CommandError):
        call_command("amux", "doctor")
    lines = capsys.readouterr().out.splitlines()
    by_name = {line.split()[1]: line for line in lines}
    assert by_name["provider:a"].startswith("FAIL") and "ValueError" in by_name["provider:a"]
    assert by_name["provider:b"].startswith("FAIL") and "unreachable" in by_name["provider:b"]
    assert {"database", "redis", "beat", "runtime:codex", "runtime:pi"} <= set(by_name)
