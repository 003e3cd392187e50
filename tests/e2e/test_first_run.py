"""A newcomer's first run in a real browser: the empty Tickets tab shows the set-up
checklist; following its first step, a provider is created on the Providers page (its key
never shown back), its connection tested against the scripted model server, and the
checklist ticks that step."""

from __future__ import annotations

import pytest

from sessions.models import ProviderProfile
from tests.support.model_server import ModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KEY = "sk-browser-first-run-0123456789"


def test_the_checklist_leads_to_the_providers_page_and_ticks_the_provider(logged_in_page):
    page = logged_in_page
    checklist = page.locator("#first-run")
    assert checklist.is_visible()
    assert page.locator("#first-run li").count() == 4
    provider_step = page.locator("#first-run li[data-step=provider]")
    assert "todo" in provider_step.get_attribute("class")

    with ModelServer(api_key=KEY) as server:
        provider_step.locator("a").click()
        page.wait_for_url(f"{page.base_url}/panel/providers/")
        assert page.locator("h1").inner_text() == "Providers"
        page.click("#add-provider")
        page.fill("#id_slug", "scripted")
        page.select_option("#id_platform", "openai-compat")
        page.fill("#id_base_url", server.base_url)
        page.fill("#id_api_key", KEY)
        page.fill("#id_models_text", "gpt-5.5")
        page.click("main form button.primary")
        page.wait_for_url(f"{page.base_url}/panel/providers/")
        row = page.locator("tr[data-provider=scripted]")
        assert row.locator(".badge").inner_text() == "set"
        assert KEY not in page.content()
        row.locator("button[data-test=scripted]").click()
        page.wait_for_url(f"{page.base_url}/panel/providers/")
        assert "reachable (200)" in page.locator(".notice").inner_text()

    assert ProviderProfile.objects.get().secrets == {"api_key": KEY}
    page.click("nav.tabs a:text-is('Tickets')")
    page.wait_for_url(f"{page.base_url}/panel/tickets/")
    assert "done" in page.locator("#first-run li[data-step=provider]").get_attribute("class")
    assert page.locator("#first-run li[data-step=provider] .tick").inner_text() == "✓"
    assert "todo" in page.locator(
        "#first-run li[data-step=agent-settings]").get_attribute("class")
