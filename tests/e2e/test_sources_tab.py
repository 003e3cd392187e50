"""The Sources tab in a real browser: add a source through its generated form, see the
webhook URL and health, send a test event, disable it; talk through web chat."""

from __future__ import annotations

import pytest

from intake.models import Source, Trigger

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_add_github_source_send_test_event_and_disable(logged_in_page):
    page = logged_in_page
    page.goto(f"{page.base_url}/panel/sources/")
    page.click("a[data-add=github]")
    page.fill("#f-name", "Our repo")
    page.fill("#f-slug", "repo")
    page.fill("#f-repo", "octo/demo")
    page.fill("#f-handle", "amux-bot")
    page.fill("#s-webhook_secret", "whs-123")
    page.fill("#s-token", "ghp_browser_secret")
    page.click("form.source-form button[type=submit]")
    page.wait_for_url(f"{page.base_url}/panel/sources/")
    row = page.locator("tr[data-source=repo]")
    assert f"{page.base_url}/hooks/github/repo" in row.locator(".webhook-url").inner_text()
    assert "ghp_browser_secret" not in page.content()
    row.locator("button[data-test=repo]").click()
    page.locator("#test-repo [data-status='200']").wait_for()
    row.locator("button", has_text="Disable").click()
    page.wait_for_url(f"{page.base_url}/panel/sources/")
    assert Source.objects.get(slug="repo").enabled is False
    page.goto(f"{page.base_url}/panel/sources/repo/edit/")
    assert page.locator("[data-secret=token]").inner_text() == "set"
    assert page.locator("#s-token").input_value() == ""


def test_web_chat_message_from_the_panel(logged_in_page):
    Source.objects.create(kind="webchat", slug="chat", name="Chat")
    page = logged_in_page
    page.goto(f"{page.base_url}/panel/sources/chat/chat/")
    page.fill("textarea[name=text]", "please update the changelog")
    page.click("form.chat-form button[type=submit]")
    page.locator(".message .text", has_text="please update the changelog").wait_for()
    assert Trigger.objects.get().actor == "operator"
