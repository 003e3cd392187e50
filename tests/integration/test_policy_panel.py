"""The Policy tab's server side: grid, preview, save (409 when stale), diff, try the gate."""

from __future__ import annotations

import pytest

from intake.models import Source
from policy.models import PolicyVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def gh():
    return Source.objects.create(kind="github", slug="gh", name="Our repo",
                                 config={"repo": "acme/app"})


@pytest.fixture
def lark():
    return Source.objects.create(kind="lark", slug="team", name="Team chat", config={
        "groups": ["oc_1"], "receive_all": {"oc_1": True}})


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


def form(base="", **extra):
    data = {"base_version": base, "source": ["gh"], "allowed:gh": "octocat\nhubot",
            "bots:gh": "", "cell:gh:comment:addressed": "on"}
    data.update(extra)
    return data


def test_grid_shows_plain_labels_and_explains_cells_that_cannot_open(operator_client, gh, lark):
    html = operator_client.get("/panel/policy").content.decode()
    assert "Comments on issues and pull requests" in html
    assert "An allowed person @mentions the agent" in html
    assert "Cannot open: This source only receives events that @mention the agent" in html
    assert "A CI result has no sender" in html
    # lark's configured group receives all: its unaddressed cells are open
    assert 'name="cell:team:group_configured:unaddressed_anyone"' in html
    assert 'name="cell:gh:comment:unaddressed_anyone"' not in html


def test_save_from_the_panel_makes_a_version_and_redirects(operator_client, gh):
    r = operator_client.post("/panel/policy/save", form(), HTTP_HX_REQUEST="true")
    assert r.status_code == 204
    entry = PolicyVersion.objects.get()
    assert r["HX-Redirect"].endswith(f"?saved={entry.version}")
    assert entry.origin == "panel" and entry.author == "operator"
    assert entry.document["sources"]["gh"]["allowed"] == ["hubot", "octocat"]
    html = operator_client.get(r["HX-Redirect"]).content.decode()
    assert entry.version[:12] in html and "current" in html


def test_stale_panel_save_is_409_and_writes_nothing(operator_client, gh):
    operator_client.post("/panel/policy/save/", form(), HTTP_HX_REQUEST="true")
    current = PolicyVersion.objects.get().version
    r = operator_client.post("/panel/policy/save/", form(**{"allowed:gh": "someone"}),
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 409
    assert "Your draft is still here" in r.content.decode()
    assert PolicyVersion.objects.count() == 1
    assert PolicyVersion.objects.get().version == current


def test_bad_panel_input_is_400_naming_the_field(operator_client, gh):
    r = operator_client.post("/panel/policy/save", form(**{"cell:gh:comment:unaddressed_anyone":
                                                          "on"}))
    assert r.status_code == 400
    assert "sources.gh.rows.comment.unaddressed_anyone" in r.content.decode()
    assert not PolicyVersion.objects.exists()


def test_viewers_cannot_save(client, viewer, gh):
    client.force_login(viewer)
    assert client.get("/panel/policy/").status_code == 200
    assert client.post("/panel/policy/save", form()).status_code == 403
    assert not PolicyVersion.objects.exists()


def test_preview_shows_changes_without_saving(operator_client, gh):
    r = operator_client.post("/panel/policy/preview", form())
    html = r.content.decode()
    assert r.status_code == 200
    assert "gh: octocat added to allowed people" in html
    assert "None: no live ticket depends on what changes" in html
    assert not PolicyVersion.objects.exists()


def test_diff_between_two_versions(operator_client, gh):
    operator_client.post("/panel/policy/save", form(), HTTP_HX_REQUEST="true")
    first = PolicyVersion.objects.get()
    operator_client.post("/panel/policy/save", form(first.version, **{"allowed:gh": "octocat"}),
                         HTTP_HX_REQUEST="true")
    second = PolicyVersion.objects.order_by("-id").first()
    r = operator_client.get(f"/panel/policy/diff?from={first.id}&to={second.id}")
    assert "gh: hubot removed from allowed people" in r.content.decode()
    assert operator_client.get("/panel/policy/diff?from=999999").status_code == 400


def test_try_the_gate_with_the_draft(operator_client, gh):
    data = form(try_scope="gh|comment", try_actor="octocat", try_addressed="on")
    html = operator_client.post("/panel/policy/try", data).content.decode()
    assert "Explicit request" in html and "gh.comment.addressed" in html
    data = form(try_scope="gh|comment", try_actor="mallory", try_addressed="on")
    html = operator_client.post("/panel/policy/try", data).content.decode()
    assert "Ignored" in html and "not on the allowlist" in html
    assert operator_client.post("/panel/policy/try", form(try_scope="x|y")).status_code == 400
