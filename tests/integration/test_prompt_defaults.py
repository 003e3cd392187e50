"""Upgrade safety: a built-in changes under an override → "Default updated", with "keep mine"
and "take the new default" each a new version; fragments without an override follow."""

import shutil

import pytest

from prompts_app import library, service
from prompts_app.models import BuiltinText, PromptVersion

pytestmark = pytest.mark.django_db

NEW_LINE = "- Upgrade: a new rule shipped with a later amux."


@pytest.fixture
def defaults_dir(tmp_path, settings):
    """A copy of the shipped defaults that the test can change like an upgrade would."""
    target = tmp_path / "defaults"
    shutil.copytree(library.PACKAGED, target)
    settings.PROMPTS_DEFAULTS_DIR = target
    return target


def upgrade(directory, key):
    path = directory / f"{key}.md"
    path.write_text(path.read_text() + NEW_LINE + "\n")


def put(api, key, text, base):
    return api.put(f"/api/v1/prompts/{key}", {"base_revision": base, "text": text},
                   format="json").json()


def test_changed_builtin_marks_the_override_default_updated(api, defaults_dir):
    old = service.fragment("main.role")
    put(api, "main.role", "# Our main role\n\nRoute everything.", 0)
    upgrade(defaults_dir, "main.role")
    body = api.get("/api/v1/prompts/main.role").json()
    assert body["state"] == "default_updated"
    assert body["text"] == "# Our main role\n\nRoute everything.\n"  # the override still rules
    assert body["base_text"] == old["default_text"]  # old default, for the side-by-side
    assert NEW_LINE in body["default_text"] and NEW_LINE not in body["base_text"]
    assert body["base_hash"] == old["default_hash"] != body["default_hash"]
    assert "Route everything." in service.current("main").text


def test_fragments_without_an_override_follow_the_new_default(api, defaults_dir):
    put(api, "team.about", "We build amux.", 0)
    upgrade(defaults_dir, "worker.role")
    body = api.get("/api/v1/prompts/worker.role").json()
    assert body["state"] == "default" and NEW_LINE in body["text"]
    assert NEW_LINE in service.current("worker").text
    assert PromptVersion.objects.count() == 1  # following a default writes nothing


def test_keep_mine_is_a_new_version_against_the_new_default(api, defaults_dir):
    put(api, "main.role", "mine", 0)
    upgrade(defaults_dir, "main.role")
    kept = api.post("/api/v1/prompts/main.role/keep", {"base_revision": 1},
                    format="json").json()
    assert (kept["revision"], kept["state"], kept["text"]) == (2, "overridden", "mine\n")
    assert kept["base_hash"] == kept["default_hash"]
    v2 = PromptVersion.objects.get(revision=2)
    assert v2.origin == "api" and v2.predecessor.revision == 1
    assert NEW_LINE in v2.config["fragments"]["main.role"]["base_text"]


def test_take_the_new_default_is_a_new_version(api, defaults_dir):
    put(api, "main.role", "mine", 0)
    upgrade(defaults_dir, "main.role")
    taken = api.post("/api/v1/prompts/main.role/restore", {"base_revision": 1},
                     format="json").json()
    assert (taken["revision"], taken["state"]) == (2, "default")
    assert NEW_LINE in taken["text"]
    assert NEW_LINE in service.current("main").text and "mine" not in service.current(
        "main").text


def test_an_old_version_reads_with_the_builtins_it_was_saved_with(api, defaults_dir):
    before = service.fragment("worker.role")["default_text"]
    put(api, "team.about", "We build amux.", 0)
    upgrade(defaults_dir, "worker.role")
    put(api, "team.about", "We build amux, upgraded.", 1)
    assert BuiltinText.objects.filter(key="worker.role").count() == 2
    changes = {c.key: c for c in service.changes_between(1, 2)}
    assert set(changes) == {"team.about", "worker.role"}
    assert changes["worker.role"].before == before
    result, revision = service.preview("worker", revision=1)
    assert revision == 1 and NEW_LINE not in result.text
