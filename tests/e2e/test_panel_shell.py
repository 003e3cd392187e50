"""A person logs in and opens every tab of the panel."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

TABS = ["Tickets", "Triage", "Sources", "Policy", "Prompts", "Sessions"]


def test_login_then_every_tab_opens(logged_in_page):
    page = logged_in_page
    for label in TABS:
        page.click(f"nav.tabs a:text-is('{label}')")
        page.wait_for_load_state()
        assert page.locator("h1").first.inner_text().startswith(label)
        current = page.locator("nav.tabs a[aria-current=page]")
        assert current.inner_text() == label
    page.click("a[title=Glossary]")
    expect(page.locator("dl.glossary dt#mandate")).to_be_visible()


def test_panel_requires_login(page, live_server):
    page.goto(f"{live_server.url}/panel/policy/")
    assert "/panel/login/" in page.url
    page.fill("#id_username", "nobody")
    page.fill("#id_password", "wrong-password")
    page.click("button[type=submit]")
    # the click only starts the form's POST; the answer page comes after it
    expect(page.locator(".errors")).to_be_visible()
