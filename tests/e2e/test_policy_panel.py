"""An operator edits the admission table in a real browser, previews, saves, sees history."""

import pytest

from intake.models import Source, Thread, Trigger
from policy.models import PolicyVersion
from tickets.actions import routing

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


def test_edit_the_table_preview_save_and_see_the_new_version(logged_in_page):
    page = logged_in_page
    gh = Source.objects.create(kind="github", slug="gh", name="Our repo",
                               config={"repo": "acme/app", "receive_all": True})
    Source.objects.create(kind="github", slug="quiet", name="Mentions only",
                          config={"repo": "acme/lib"})
    page.goto(f"{page.base_url}/panel/policy/")

    # first version: octocat may ask on comments
    page.fill("textarea[name='allowed:gh']", "octocat")
    page.check("input[name='cell:gh:comment:addressed']")
    page.wait_for_selector("#preview-body:has-text('Comments on issues and pull requests')")
    assert "octocat added to allowed people" in page.inner_text("#preview-body")
    page.click("#save-button")
    page.wait_for_selector("#saved-note")
    first = PolicyVersion.objects.get().version
    assert page.inner_text("#current-version") == first[:12]

    # a live ticket rests on that cell
    thread = Thread.objects.create(source=gh, key="acme/app#1", title="Crash")
    trigger = Trigger.objects.create(
        source=gh, thread=thread, external_id="c1", scope="comment", actor="octocat",
        addressed=True, decision="explicit", strength="explicit",
        rule="gh.comment.addressed", policy_version=first, text="@amux fix")
    routing.route_trigger(trigger_id=trigger.pk)

    # the cell that cannot open says why
    quiet = page.locator("section[data-source=quiet] tr[data-scope=comment]")
    assert "Cannot open" in quiet.inner_text()

    # close the cell: the preview names the affected live ticket before saving
    page.goto(f"{page.base_url}/panel/policy/")
    assert page.locator("#saved-note").count() == 0
    page.uncheck("input[name='cell:gh:comment:addressed']")
    page.wait_for_selector("ul.affected li")
    assert "its rule is turned off" in page.inner_text("ul.affected")

    # try the gate against the draft
    page.select_option("select[name=try_scope]", "gh|comment")
    page.fill("input[name=try_actor]", "octocat")
    page.check("input[name=try_addressed]")
    page.click("#try-form button[type=submit]")
    page.wait_for_selector("#verdict")
    assert page.get_attribute("#verdict", "data-decision") == "ignore"

    page.click("#save-button")
    page.wait_for_selector("#saved-note")
    second = PolicyVersion.objects.order_by("-id").first().version
    assert second != first
    rows = page.locator("#history tr[data-version]")
    assert rows.count() == 2
    assert rows.first.get_attribute("data-version") == second
    assert "current" in rows.first.inner_text()

    # the diff between the two versions
    page.click("#diff-form button[type=submit]")
    page.wait_for_selector("#diff-body")
    assert "@mentions the agent: closed" in page.inner_text("#diff-body")


def test_a_stale_save_in_the_browser_is_refused_and_keeps_the_draft(logged_in_page):
    page = logged_in_page
    Source.objects.create(kind="github", slug="gh", name="Our repo", config={"repo": "a/b"})
    page.goto(f"{page.base_url}/panel/policy/")
    page.fill("textarea[name='allowed:gh']", "octocat")
    # someone else saves meanwhile
    from policy import services

    services.save({"acceptance": "manual", "sources": {"gh": {"allowed": ["hubot"]}}}, None)
    page.click("#save-button")
    page.wait_for_selector("#policy-conflict")
    assert page.input_value("textarea[name='allowed:gh']") == "octocat"
    assert PolicyVersion.objects.count() == 1
    assert PolicyVersion.objects.get().document["sources"]["gh"]["allowed"] == ["hubot"]
