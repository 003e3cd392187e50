"""A ticket's page shows the words that asked for the work, as they came."""

import pytest
from playwright.sync_api import expect

from tests.factories import MandateFactory, TicketFactory, TriggerFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

REQUEST = ("@amux the login page crashes on Safari.\n"
           "Steps: open /login, press <b>Enter</b> twice.")


def test_the_ticket_page_shows_the_original_request(logged_in_page):
    page = logged_in_page
    trigger = TriggerFactory(text=REQUEST, actor="octocat")
    ticket = TicketFactory(thread=trigger.thread, mandate=None)
    MandateFactory(ticket=ticket, trigger=trigger, requester="octocat")
    page.goto(f"{page.base_url}/panel/tickets/{ticket.pk}/")
    request = page.locator("#request")
    expect(request.locator("blockquote")).to_contain_text("crashes on Safari")
    assert request.locator("blockquote").inner_text().strip() == REQUEST  # its lines kept
    expect(request.locator("blockquote b")).to_have_count(0)  # the requester's HTML is text
    expect(request).to_contain_text("octocat")


def test_a_ticket_without_a_recorded_request_says_so(logged_in_page):
    page = logged_in_page
    ticket = TicketFactory()
    page.goto(f"{page.base_url}/panel/tickets/{ticket.pk}/")
    expect(page.locator("#request")).to_have_text(
        "No request text was recorded for this ticket.")
