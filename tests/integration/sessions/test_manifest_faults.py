"""An expert's manifest names every fault at once, each by its dotted path — in the REST
API and in the panel's manifest editor alike — and nothing is kept."""

from __future__ import annotations

import html
import json

import pytest
from django.urls import reverse

from execution.models import AgentProfile

pytestmark = pytest.mark.django_db

BAD = {"version": 2, "name": "", "colour": "red", "model": "gpt-5.5",
       "skills": [{"name": "ok", "content": "fine"}, {"name": "x", "tone": "dry"}, "loose"]}
NAMED = {"manifest.name", "manifest.colour", "manifest.model", "manifest.skills.1.tone",
         "manifest.skills.1.content", "manifest.skills.2"}


def test_the_api_names_every_manifest_fault(api):
    answer = api.post("/api/v1/profiles/", {"manifest": BAD}, format="json")
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "invalid_manifest"
    assert set(error["fields"]) == NAMED
    assert error["fields"]["manifest.colour"][0].startswith("unknown field 'colour'")
    assert not AgentProfile.objects.filter(builtin=False).exists()


def test_the_panel_editor_names_every_manifest_fault(client, operator):
    client.force_login(operator)
    page = client.post(reverse("panel-profiles"), {"manifest": json.dumps(BAD)})
    assert page.status_code == 400
    text = html.unescape(page.content.decode())
    for path in NAMED:
        assert f"<li>{path}: " in text, path
    assert not AgentProfile.objects.filter(builtin=False).exists()
    made = client.post(reverse("panel-profiles"), {"manifest": json.dumps(
        {"version": 2, "name": "Helper"})})
    assert made.status_code == 302
    edited = client.post(reverse("panel-profile-edit", args=["helper"]),
                         {"manifest": json.dumps({"version": 2, "name": "Helper",
                                                  "tone": "dry", "skills": {}})})
    assert edited.status_code == 400
    text = html.unescape(edited.content.decode())
    assert "<li>manifest.tone: " in text and "<li>manifest.skills: " in text
