"""The Schedules page under the Sessions tab, in a real browser: add a schedule (a bad one
first, refused naming the field), see it listed, pause and resume it, read its runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from execution import profiles, schedules
from execution.models import Schedule

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]


def test_schedules_page_lists_creates_pauses_and_shows_runs(logged_in_page, openai_provider):
    profiles.ensure_builtin()
    page = logged_in_page
    page.click("nav.tabs a:text-is('Sessions')")
    page.click("#schedules-link")
    expect(page.locator("h1")).to_have_text("Schedules")
    expect(page.locator(".empty")).to_contain_text("No schedules yet")

    page.fill("#s-name", "morning digest")
    page.fill("#s-cron", "61 * * * *")
    page.select_option("#s-mode", "subtask")
    page.fill("#s-prompt", "Summarise yesterday's merged pull requests.")
    page.select_option("#s-runtime", "codex")
    page.fill("#s-model", "gpt-5.5")
    page.click("#schedule-form button[type=submit]")
    expect(page.locator("#schedule-error")).to_contain_text("cron")
    assert not Schedule.objects.exists()

    expect(page.locator("#s-prompt")).to_have_value(
        "Summarise yesterday's merged pull requests.")  # the form kept what was typed
    page.fill("#s-cron", "")
    page.fill("#s-every", "3600")
    page.fill("#s-extra", "-c\nmodel_reasoning_summary=none")
    page.click("#schedule-form button[type=submit]")
    expect(page.locator("p.notice.success")).to_contain_text("morning digest")
    row = page.locator("tr[data-schedule='morning digest']")
    expect(row).to_contain_text("every 3600 s")
    expect(row).to_contain_text("codex · gpt-5.5")
    schedule = Schedule.objects.get()
    assert schedule.execution["extra_args"] == ["-c", "model_reasoning_summary=none"]

    row.locator("a").click()
    expect(page.locator("#frozen")).to_contain_text("model_reasoning_summary=none")
    expect(page.locator(".empty")).to_contain_text("not fired yet")
    page.click("#pause")
    expect(page.locator("#paused")).to_be_visible()
    assert Schedule.objects.get().paused
    page.click("#resume")
    expect(page.locator("#paused")).to_have_count(0)

    # beat's due check an hour on: one run, shown with its slot and state
    schedules.fire_due(timezone.now() + timedelta(seconds=3601))
    page.reload()
    expect(page.locator("table.runs tr")).to_have_count(2)
    expect(page.locator("table.runs .run-state")).to_have_text("pending")

    page.click("#delete")
    expect(page.locator(".empty")).to_contain_text("No schedules yet")
    assert not Schedule.objects.exists()
