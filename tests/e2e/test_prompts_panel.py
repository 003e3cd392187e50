"""In a real browser: edit an override, meet a conflicting save from a second tab while
keeping the draft, then resolve Default-updated fragments in the side-by-side view."""

import shutil

import pytest
from playwright.sync_api import expect

from prompts_app import library
from prompts_app.models import PromptVersion

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

UPGRADE = "- Upgrade: a rule shipped with a later amux."


def test_override_conflict_and_default_updated(logged_in_page, settings, tmp_path):
    defaults = tmp_path / "defaults"
    shutil.copytree(library.PACKAGED, defaults)
    settings.PROMPTS_DEFAULTS_DIR = defaults
    page = logged_in_page
    base = page.base_url

    # 1. Edit an override of a built-in fragment.
    page.click("nav.tabs a:text-is('Prompts')")
    expect(page.locator("#builtins tr[data-key='main.role'] .state")).to_have_text("Default")
    page.click("#builtins tr[data-key='main.role'] a")
    page.fill("#text", "# Main session\n\nRoute with a short note; never plan.")
    page.click("#save")
    expect(page.locator("#saved")).to_contain_text("revision 1")
    expect(page.locator("#state")).to_have_text("Overridden")
    page.fill("#text", "# Worker\n\nOur worker role.")  # not saved: we leave the page
    page.goto(f"{base}/panel/prompts/edit/worker.role/")
    page.fill("#text", "# Worker\n\nOur worker role.")
    page.click("#save")
    expect(page.locator("#saved")).to_contain_text("revision 2")

    # 2. Two tabs edit the team section; the later save meets a conflict, keeps its draft.
    second = page.context.new_page()
    page.goto(f"{base}/panel/prompts/edit/team.about/")
    second.goto(f"{base}/panel/prompts/edit/team.about/")
    second.fill("#text", "We are the platform team.")
    second.click("#save")
    expect(second.locator("#saved")).to_contain_text("revision 3")
    page.fill("#text", "My draft about the team.")
    page.click("#save")
    conflict = page.locator("#conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_contain_text("latest is revision 3")
    expect(conflict).to_contain_text("+We are the platform team.")
    expect(page.locator("#text")).to_have_value("My draft about the team.")
    assert PromptVersion.objects.count() == 3
    page.click("#save")
    expect(page.locator("#saved")).to_contain_text("revision 4")
    expect(page.locator("#text")).to_have_value("My draft about the team.\n")
    second.close()

    # 3. An upgrade changes the built-ins under both overrides.
    for key in ("main.role", "worker.role"):
        path = defaults / f"{key}.md"
        path.write_text(path.read_text() + UPGRADE + "\n")
    page.goto(f"{base}/panel/prompts/")
    expect(page.locator("#builtins tr[data-key='main.role'] .state")).to_have_text(
        "Default updated")
    expect(page.locator("#default-updated")).to_be_visible()
    page.click("#builtins tr[data-key='main.role'] a")
    expect(page.locator("#old-default")).not_to_contain_text(UPGRADE)
    expect(page.locator("#new-default")).to_contain_text(UPGRADE)
    expect(page.locator("#mine")).to_contain_text("never plan.")
    page.click("#keep-mine")
    expect(page.locator("#saved")).to_contain_text("revision 5")
    expect(page.locator("#state")).to_have_text("Overridden")
    expect(page.locator("#default-updated")).to_have_count(0)
    expect(page.locator("#text")).to_have_value(
        "# Main session\n\nRoute with a short note; never plan.\n")

    page.goto(f"{base}/panel/prompts/edit/worker.role/")
    expect(page.locator("#state")).to_have_text("Default updated")
    page.click("#take-default")
    expect(page.locator("#saved")).to_contain_text("revision 6")
    expect(page.locator("#state")).to_have_text("Default")
    expect(page.locator("#text")).to_have_value(
        (defaults / "worker.role.md").read_text().strip() + "\n")

    # The history shows every choice as its own version, and the preview marks the layers.
    page.click("nav.subtabs a:text-is('Versions')")
    expect(page.locator("#history tr[data-revision]")).to_have_count(6)
    page.click("nav.subtabs a:text-is('Preview: worker')")
    expect(page.locator("section.part[data-key='worker.role'] .source")).to_have_text(
        "built-in")
    expect(page.locator("section.part[data-key='team.about'] .meta")).to_contain_text(
        "Layer 4")
