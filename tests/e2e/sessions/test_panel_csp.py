"""The panel works under its Content-Security-Policy: in a real browser against the real
ASGI app, every tab opens, htmx requests and the timeline websocket work, and the browser
reports no CSP violation anywhere."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from sessions import services, timeline
from sessions.new_session import Launch, SessionSpec
from tests.support.asgi import AsgiServer
from tests.support.workers import purge_queues, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]

TABS = ["Tickets", "Triage", "Sources", "Policy", "Prompts", "Sessions"]
# Recorded by the page itself (an init script runs outside the page's CSP).
RECORD = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", e => window.__csp.push(
  e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sourceFile || "")));
"""


def _violations(page) -> list[str]:
    return page.evaluate("window.__csp || []")


def test_every_tab_htmx_and_the_websocket_work_under_the_csp(page, operator, openai_provider,
                                                             session_dirs, tmp_path):
    purge_queues()
    server = AsgiServer(worker_env(session_dirs), log=tmp_path / "uvicorn.log")
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text)
            if "Content Security Policy" in m.text or "Refused to" in m.text else None)
    page.add_init_script(RECORD)
    seen: list[str] = []
    try:
        session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                        model="gpt-5.5"),
                                          spec=SessionSpec(name="csp test"))
        timeline.note(session.pk, "error", {"code": "before", "message": "stored first"})
        response = page.goto(f"{server.url}/panel/login/")
        assert "script-src 'self'" in response.headers["content-security-policy"]
        page.fill("#id_username", "operator")
        page.fill("#id_password", "operator-pass-123")
        page.click("button[type=submit]")
        page.wait_for_url("**/panel/tickets/")
        for label in TABS:
            page.click(f"nav.tabs a:text-is('{label}')")
            page.wait_for_load_state("networkidle")
            assert page.locator("h1").first.inner_text().startswith(label)
            seen += [f"{label}: {v}" for v in _violations(page)]
        # htmx under the CSP: the Policy tab's preview is an htmx POST swapped into the page
        page.click("nav.tabs a:text-is('Policy')")
        page.click("#preview-button")
        expect(page.locator("#policy-preview")).not_to_be_empty()
        seen += [f"Policy preview: {v}" for v in _violations(page)]
        # the websocket under the CSP: the timeline arrives, a message is queued and the form
        # clears itself (panel.js's data-reset-on-success, formerly an inline handler)
        page.click("nav.tabs a:text-is('Sessions')")
        page.click("text=csp test")
        # (locators, not wait_for_function: Playwright evaluates a string there, which this
        # very CSP forbids)
        expect(page.locator("#timeline-events > .ev")).to_have_count(2, timeout=30_000)
        page.fill("#message-text", "hello under the CSP")
        page.click("#message-form button[type=submit]")
        page.wait_for_selector("text=Queued as turn 1")
        expect(page.locator("#message-text")).to_have_value("")
        seen += [f"Session: {v}" for v in _violations(page)]
    finally:
        server.stop()
    assert not seen
    assert not console


def test_the_stop_confirmation_works_under_the_csp_and_payload_urls_stay_text(
        page, operator, session_dirs, tmp_path):
    """The Stop button's confirmation (panel.js, formerly an inline onsubmit) asks, a "no"
    keeps the ticket, a "yes" stops it; a javascript: thread URL is shown as text."""
    from intake.models import Source, Thread, Trigger
    from tickets.actions import routing
    from tickets.models import Ticket

    source = Source.objects.create(kind="github", slug="gh", name="GitHub")
    thread = Thread.objects.create(source=source, key="octo/app#12", title="Crash on login",
                                   url="javascript:alert(document.cookie)")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id="e1", scope="comment", actor="octocat",
        is_human=True, addressed=True, text="@amux please fix the crash", decision="explicit",
        strength="explicit", rule="gh.comment.addressed", policy_version="v1")
    assert routing.route_trigger(trigger_id=trigger.pk) == "admitted"
    ticket = Ticket.objects.get()
    server = AsgiServer(worker_env(session_dirs), log=tmp_path / "uvicorn.log")
    page.add_init_script(RECORD)
    try:
        page.goto(f"{server.url}/panel/login/")
        page.fill("#id_username", "operator")
        page.fill("#id_password", "operator-pass-123")
        page.click("button[type=submit]")
        page.wait_for_url("**/panel/tickets/")
        page.goto(f"{server.url}/panel/tickets/{ticket.pk}/")
        assert page.locator("a[href^='javascript']").count() == 0
        expect(page.locator("text=javascript:alert(document.cookie)")).to_be_visible()
        answers = iter([False, True])
        asked = []

        def answer(dialog):
            asked.append(dialog.message)
            dialog.accept() if next(answers) else dialog.dismiss()

        page.on("dialog", answer)
        page.click("text=Stop ticket")
        page.wait_for_timeout(500)
        ticket.refresh_from_db()
        assert asked == ["Stop this ticket?"] and ticket.ended_at is None
        page.click("text=Stop ticket")
        page.wait_for_load_state("networkidle")
        ticket.refresh_from_db()
        assert len(asked) == 2 and ticket.ended_at is not None
        assert _violations(page) == []
    finally:
        server.stop()
