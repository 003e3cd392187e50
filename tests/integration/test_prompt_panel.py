"""The Prompts tab, server-rendered: states, editor, conflicts keep the draft, history."""

import shutil

import pytest

from prompts_app import library, service
from prompts_app.models import PromptVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def panel(client, operator):
    client.force_login(operator)
    return client


def test_tab_lists_team_sections_skills_fragments_and_fixed_texts(panel):
    service.save("skill.identities", "ou_1 is octocat", 0, origin="api")
    html = panel.get("/panel/prompts/").content.decode()
    for text in ("Team: who we are", "identities", "Main session: role", "Worker: role",
                 "Tools of a worker", "Not written yet", "In code (not editable)"):
        assert text in html


def test_editor_saves_an_override_as_a_panel_version(panel, operator):
    response = panel.post("/panel/prompts/edit/main.role/",
                          {"text": "# Main\n\nRoute only.", "base_revision": "0",
                           "action": "save"})
    assert response.status_code == 302 and response["Location"].endswith("?saved=1")
    v = PromptVersion.objects.get()
    assert (v.origin, v.author) == ("panel", "operator")
    page = panel.get(response["Location"]).content.decode()
    assert "Saved as revision 1" in page and "Overridden" in page


def test_a_conflicting_save_keeps_the_draft_and_shows_what_changed(panel):
    service.save("team.about", "original", 0, origin="api")
    service.save("team.about", "changed by someone else", 1, origin="api", author="ana")
    response = panel.post("/panel/prompts/edit/team.about/",
                          {"text": "my careful draft", "base_revision": "1",
                           "action": "save"})
    assert response.status_code == 409
    html = response.content.decode()
    assert "my careful draft</textarea>" in html
    assert "+changed by someone else" in html and "-original" in html
    assert 'name="base_revision" value="2"' in html
    assert PromptVersion.objects.count() == 2
    again = panel.post("/panel/prompts/edit/team.about/",
                       {"text": "my careful draft", "base_revision": "2", "action": "save"})
    assert again.status_code == 302
    assert service.fragment("team.about")["text"] == "my careful draft\n"


def test_bad_input_in_the_editor_keeps_the_draft_and_names_the_field(panel):
    response = panel.post("/panel/prompts/edit/team.about/",
                          {"text": "   ", "base_revision": "0", "action": "save"})
    assert response.status_code == 400
    assert "required section" in response.content.decode()
    assert PromptVersion.objects.count() == 0
    assert panel.get("/panel/prompts/edit/nope/").status_code == 404
    fixed = panel.post("/panel/prompts/edit/tools.main/",
                       {"text": "x", "base_revision": "0", "action": "save"})
    assert fixed.status_code == 400 and PromptVersion.objects.count() == 0


def test_viewers_see_the_tab_but_cannot_save(client, viewer):
    client.force_login(viewer)
    assert client.get("/panel/prompts/").status_code == 200
    page = client.get("/panel/prompts/edit/main.role/").content.decode()
    assert "<textarea" not in page
    response = client.post("/panel/prompts/edit/main.role/",
                           {"text": "x", "base_revision": "0", "action": "save"})
    assert response.status_code == 403 and PromptVersion.objects.count() == 0


def test_default_updated_side_by_side_and_choices(panel, settings, tmp_path):
    target = tmp_path / "defaults"
    shutil.copytree(library.PACKAGED, target)
    settings.PROMPTS_DEFAULTS_DIR = target
    service.save("worker.role", "our worker role", 0, origin="api")
    (target / "worker.role.md").write_text("# Worker\n\nThe new default.\n")
    overview = panel.get("/panel/prompts/").content.decode()
    assert "Default updated" in overview
    page = panel.get("/panel/prompts/edit/worker.role/").content.decode()
    assert 'id="old-default"' in page and "The new default." in page
    assert "our worker role" in page and "Keep mine" in page
    response = panel.post("/panel/prompts/edit/worker.role/",
                          {"base_revision": "1", "action": "keep"})
    assert response.status_code == 302
    assert service.fragment("worker.role")["state"] == "overridden"


def test_history_diff_and_restore(panel):
    service.save("team.about", "one", 0, origin="api")
    service.save("team.about", "two", 1, origin="api")
    html = panel.get("/panel/prompts/versions/?from=1&to=2").content.decode()
    assert "-one" in html and "+two" in html
    response = panel.post("/panel/prompts/versions/1/restore/", {"base_revision": "2"})
    assert response.status_code == 302 and "restored=3" in response["Location"]
    assert service.fragment("team.about")["text"] == "one\n"
    stale = panel.post("/panel/prompts/versions/1/restore/", {"base_revision": "2"})
    assert "conflict=3" in stale["Location"] and PromptVersion.objects.count() == 3
    assert panel.get("/panel/prompts/versions/?from=1&to=99").status_code == 400
    bad = panel.post("/panel/prompts/versions/1/restore/", {"base_revision": "x"})
    assert bad.status_code == 400 and PromptVersion.objects.count() == 3


def test_preview_shows_parts_with_layers(panel):
    service.save("team.about", "We build amux.", 0, origin="api")
    html = panel.get("/panel/prompts/preview/main/").content.decode()
    assert 'data-key="team.about" data-layer="4"' in html
    assert 'data-key="tools.main" data-layer="2"' in html
    assert 'data-key="policy" data-layer="1"' in html
    assert panel.get("/panel/prompts/preview/boss/").status_code == 404
