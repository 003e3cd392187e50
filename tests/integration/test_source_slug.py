"""A source's slug is fixed once it has received events: the webhook URL configured in
GitHub and the policy name the source by it (API, panel and admin alike)."""

from __future__ import annotations

import pytest

from intake.models import Delivery, Source
from tests.support.github_payloads import example, signed

pytestmark = pytest.mark.django_db

GITHUB = {"kind": "github", "slug": "gh", "name": "GitHub",
          "config": {"repo": "Codertocat/Hello-World", "handle": "amux-bot"},
          "secrets": {"webhook_secret": "whs", "token": "ghp_secret_value"}}


@pytest.fixture
def source(api):
    assert api.post("/api/v1/sources", GITHUB).status_code == 201
    return Source.objects.get(slug="gh")


def _receive_an_event(client):
    body, headers = signed("issues", example("issues", "opened"), "whs")
    response = client.post("/hooks/github/gh", data=body, content_type="application/json",
                           **headers)
    assert response.status_code in (200, 202), response.content
    assert Delivery.objects.filter(source__slug="gh").exists()


def test_a_new_source_may_be_renamed(api, source):
    response = api.patch("/api/v1/sources/gh", {"slug": "github"})
    assert response.status_code == 200, response.json()
    assert response.json()["slug"] == "github"


def test_the_api_refuses_renaming_a_source_that_received_events(api, client, source):
    _receive_an_event(client)
    for method in (api.patch, api.put):
        response = method("/api/v1/sources/gh", {**GITHUB, "slug": "github"})
        assert response.status_code == 400, response.json()
        error = response.json()["error"]
        assert list(error["fields"]) == ["slug"]
        assert "received events" in error["fields"]["slug"][0]
    assert Source.objects.filter(slug="gh").exists()
    # The same slug again is no change: saving the rest still works.
    same = api.patch("/api/v1/sources/gh", {"slug": "gh", "name": "Renamed only"})
    assert same.status_code == 200 and same.json()["name"] == "Renamed only"


def test_the_panel_shows_the_slug_fixed_and_refuses_a_forged_rename(
        api, client, operator, source):
    _receive_an_event(client)
    client.force_login(operator)
    form = client.get("/panel/sources/gh/edit/").content.decode()
    assert "data-slug-fixed" in form and 'name="slug"' not in form
    data = {"name": "GitHub", "slug": "github", "enabled": "on",
            "repo": "Codertocat/Hello-World", "api_url": "https://api.github.com",
            "handle": "amux-bot", "default_branch": "main", "bots": "", "poll": "on"}
    refused = client.post("/panel/sources/gh/edit/", data)
    assert refused.status_code == 400
    assert "received events" in refused.content.decode()
    assert Source.objects.filter(slug="gh").exists()


def test_the_panel_renames_a_source_without_events(client, operator, source):
    client.force_login(operator)
    assert 'name="slug"' in client.get("/panel/sources/gh/edit/").content.decode()
    data = {"name": "GitHub", "slug": "github", "enabled": "on",
            "repo": "Codertocat/Hello-World", "api_url": "https://api.github.com",
            "handle": "amux-bot", "default_branch": "main", "bots": "", "poll": "on"}
    assert client.post("/panel/sources/gh/edit/", data).status_code == 302
    assert Source.objects.filter(slug="github").exists()


def test_the_admin_shows_the_slug_read_only_once_events_arrived(
        api, client, admin_client, source):
    page = admin_client.get(f"/admin/intake/source/{source.pk}/change/").content.decode()
    assert 'name="slug"' in page
    _receive_an_event(client)
    page = admin_client.get(f"/admin/intake/source/{source.pk}/change/").content.decode()
    assert 'name="slug"' not in page

