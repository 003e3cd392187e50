"""`prompts/` per CONTRACT.md: fragment shape, bad input answers 400 naming the field."""

import pytest

from prompts_app import core
from prompts_app.models import PromptVersion

pytestmark = pytest.mark.django_db


def test_fragments_list_shape_and_states(api):
    body = api.get("/api/v1/prompts/").json()
    assert body["revision"] == 0 and body["count"] == len(body["results"])
    by_key = {f["key"]: f for f in body["results"]}
    for key in ("main.role", "worker.role", "shared.rules", "shared.attention",
                "team.about", "team.main", "team.worker", "tools.main", "tools.worker"):
        assert key in by_key
    for f in body["results"]:
        assert {"key", "state", "text", "default_text", "editable", "revision"} <= set(f)
        assert f["state"] in {"default", "overridden", "default_updated"}
    assert by_key["main.role"]["editable"] and by_key["main.role"]["state"] == "default"
    assert by_key["main.role"]["text"] == by_key["main.role"]["default_text"]
    assert not by_key["tools.worker"]["editable"]
    assert not by_key["notice.followup"]["editable"] and not by_key["card.ticket"]["editable"]
    assert api.get("/api/v1/prompts").status_code == 200  # no trailing slash


def test_put_answers_the_new_revision_and_fragment(api):
    response = api.put("/api/v1/prompts/worker.role", {"base_revision": 0, "text": "Mine."},
                       format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["revision"], body["state"], body["text"]) == (1, "overridden", "Mine.\n")
    assert body["base_hash"] == body["default_hash"]
    assert api.get("/api/v1/prompts/worker.role/").json()["revision"] == 1


@pytest.mark.parametrize("key,body,field", [
    ("no.such.key", {"base_revision": 0, "text": "x"}, "key"),
    ("tools.worker", {"base_revision": 0, "text": "x"}, "key"),
    ("notice.pr_closed", {"base_revision": 0, "text": "x"}, "key"),
    ("card.question", {"base_revision": 0, "text": "x"}, "key"),
    ("team.about", {"base_revision": 0, "text": "  "}, "text"),
    ("main.role", {"base_revision": 0, "text": ""}, "text"),
    ("main.role", {"base_revision": 0, "text": "x" * (core.MAX_TEXT_CHARS + 1)}, "text"),
    ("main.role", {"base_revision": 0, "text": ["x"]}, "text"),
    ("main.role", {"base_revision": 0}, "text"),
    ("main.role", {"text": "x"}, "base_revision"),
    ("main.role", {"base_revision": "abc", "text": "x"}, "base_revision"),
    ("main.role", {"base_revision": -1, "text": "x"}, "base_revision"),
    ("main.role", {"base_revision": True, "text": "x"}, "base_revision"),
    ("main.role", {"base_revision": 5, "text": "x"}, "base_revision"),
    ("skill.Not Valid", {"base_revision": 0, "text": "x"}, "key"),
])
def test_bad_input_answers_400_naming_the_field_and_writes_nothing(api, key, body, field):
    response = api.put(f"/api/v1/prompts/{key}", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"] and error["message"]
    assert PromptVersion.objects.count() == 0


def test_non_object_and_malformed_bodies_are_400(api):
    assert api.put("/api/v1/prompts/main.role", [1, 2], format="json").status_code == 400
    response = api.generic("PUT", "/api/v1/prompts/main.role", "{not json",
                           content_type="application/json")
    assert response.status_code == 400
    assert PromptVersion.objects.count() == 0


def test_restore_and_keep_of_unknown_or_fixed_keys_are_400(api):
    for path in ("/api/v1/prompts/nope/restore", "/api/v1/prompts/tools.main/restore",
                 "/api/v1/prompts/main.role/keep"):
        response = api.post(path, {"base_revision": 0}, format="json")
        assert response.status_code == 400
        assert "key" in response.json()["error"]["fields"]


def test_unknown_key_reads_404(api):
    assert api.get("/api/v1/prompts/no.such").status_code == 404
    assert api.get("/api/v1/prompts/skill.nobody").status_code == 404


def test_skills_are_created_by_writing_and_removed_by_restoring(api):
    made = api.put("/api/v1/prompts/skill.identities",
                   {"base_revision": 0, "text": "Lark 张三 (ou_1) is GitHub zhangsan."},
                   format="json").json()
    assert made["state"] == "overridden" and made["revision"] == 1
    keys = [f["key"] for f in api.get("/api/v1/prompts/").json()["results"]]
    assert "skill.identities" in keys
    removed = api.post("/api/v1/prompts/skill.identities/restore", {"base_revision": 1},
                       format="json").json()
    assert removed["revision"] == 2 and removed["state"] == "default"
    keys = [f["key"] for f in api.get("/api/v1/prompts/").json()["results"]]
    assert "skill.identities" not in keys


def test_viewers_read_but_cannot_change_prompts(client, viewer):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=viewer)[1]}")
    assert reader.get("/api/v1/prompts/").status_code == 200
    response = reader.put("/api/v1/prompts/main.role", {"base_revision": 0, "text": "x"},
                          format="json")
    assert response.status_code == 403
    assert PromptVersion.objects.count() == 0


def test_preview_marks_each_part_with_its_layer(api):
    api.put("/api/v1/prompts/team.about", {"base_revision": 0, "text": "We build amux."},
            format="json")
    body = api.get("/api/v1/prompts/preview/worker").json()
    assert body["revision"] == 1
    layers = {p["key"]: (p["layer"], p["source"]) for p in body["parts"]}
    assert layers["team.about"] == (4, "team") and layers["tools.worker"] == (2, "code")
    assert body["parts"][-1]["key"] == "policy"
    assert api.get("/api/v1/prompts/preview/boss").status_code == 404
    api.put("/api/v1/prompts/team.about", {"base_revision": 1, "text": "Later text."},
            format="json")
    old = api.get("/api/v1/prompts/preview/worker?revision=1").json()
    assert old["revision"] == 1 and "We build amux." in old["text"]
    assert "Later text." in api.get("/api/v1/prompts/preview/worker").json()["text"]
    assert api.get("/api/v1/prompts/preview/worker?revision=7").status_code == 404
    assert api.get("/api/v1/prompts/preview/worker?revision=x").status_code == 404
