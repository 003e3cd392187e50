"""Create a GitHub App in three clicks, in a real browser: the Sources tab's button, the
form, the manifest posted to (the local) GitHub by the page itself, the app named and
confirmed on GitHub's page, back to amux, "Install the app" on GitHub, and the source
ready once the signed installation event reached its webhook."""

from __future__ import annotations

import re

import pytest

from intake import process
from intake.models import Source
from tests.support.github_apps import GitHubApps

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_create_install_and_ready(logged_in_page):
    page = logged_in_page
    with GitHubApps() as github:
        page.goto(f"{page.base_url}/panel/sources/")
        page.click("a[data-create-github-app]")
        page.check("#f-host-enterprise")
        page.fill("#f-enterprise_url", github.url)
        page.check("#f-owner-organization")
        page.fill("#f-org", "acme")
        page.fill("#f-repos", "acme/demo")
        page.fill("#f-slug", "gh")
        page.click("form.github-app-form button[type=submit]")
        # the amux page posts the manifest by itself: the next page is GitHub's
        page.wait_for_url(re.compile(re.escape(f"{github.url}/organizations/acme/settings/apps/new?state=")
                                      + ".+"))
        assert page.locator("#owner").inner_text() == "acme"
        assert page.locator("#app-name").input_value() == "amux gh"
        page.fill("#app-name", "amux acme")
        page.click("#create-app")
        status_page = re.escape(f"{page.base_url}/panel/sources/github-app/") + r"\d+/"
        page.wait_for_url(re.compile(status_page + "$"))
        page.locator("[data-state=waiting_for_installation]").wait_for()
        source = Source.objects.get(slug="gh")
        assert source.secrets["app_id"] == str(github.apps["amux-acme"].id)
        assert "BEGIN RSA PRIVATE KEY" not in page.content()
        assert github.apps["amux-acme"].webhook_secret not in page.content()

        page.click("a[data-install]")
        page.wait_for_url(f"{github.url}/apps/amux-acme/installations/new")
        page.fill("#repos", "acme/demo")
        page.click("#install")
        # GitHub delivered the signed event to amux's webhook, then sent the person back
        page.wait_for_url(re.compile(status_page + r"\?installation_id=\d+&setup_action=install$"))
        assert github.deliveries == [(f"{page.base_url}/hooks/github/gh", 202)]
        process.drain()  # the intake drainer, as a worker runs it
        page.locator("[data-state=ready]").wait_for()
        installation = github.apps["amux-acme"].installations[-1]
        assert f"installation {installation}" in page.locator("#app-status").inner_text()

        page.goto(f"{page.base_url}/panel/sources/")
        row = page.locator("tr[data-source=gh]")
        assert row.locator("[data-installation=installed]").is_visible()
        assert f"{page.base_url}/hooks/github/gh" in row.locator(".webhook-url").inner_text()
