"""REST profiles/, bot-profiles/, launch-presets/, tasks/, instances/: v2 manifests only,
the built-in pack, presets owned by amux, frozen execution settings, permission defaults and
ownership. (Turns on real runtimes: test_task_runs.py and test_profile_prompt.py.)"""

from __future__ import annotations

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from execution.core import launch_rules as execution
from execution.core import manifest
from execution.models import AgentInstance, AgentProfile, BotProfile, LaunchPreset, TaskRun
from sessions import isolation
from sessions.models import Session

pytestmark = pytest.mark.django_db

V2 = {"version": 2, "name": "Reviewer", "description": "reviews diffs",
      "instructions": "Read the diff twice.",
      "skills": [{"name": "nitpick", "description": "style", "content": "Flag long lines."}]}


def _client(user) -> APIClient:
    client = APIClient()
    _, token = AuthToken.objects.create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_the_built_in_pack_is_exactly_three_read_only_profiles(api):
    body = api.get("/api/v1/profiles/").json()
    assert body["count"] == 3
    assert {(p["slug"], p["builtin"]) for p in body["results"]} == {
        ("codex", True), ("claude", True), ("pi", True)}
    for item in body["results"]:
        # v2 content only: no endpoint, credential, outside skill or model binding
        assert item["manifest"]["version"] == 2
        assert set(item["manifest"]) == {"version", "name", "description", "instructions",
                                         "skills"}
        assert item["manifest"]["skills"] == []
    refused = api.put("/api/v1/profiles/codex", {"manifest": V2}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "builtin"
    assert api.delete("/api/v1/profiles/pi").status_code == 403
    assert AgentProfile.objects.filter(builtin=True).count() == 3


def test_a_v1_manifest_is_refused_naming_the_version(api):
    response = api.post("/api/v1/profiles/", {"manifest": {**V2, "version": 1}},
                        format="json")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["manifest.version"]
    assert not AgentProfile.objects.filter(builtin=False).exists()


@pytest.mark.parametrize("field", manifest.EXECUTION_FIELDS)
def test_a_manifest_declaring_execution_settings_is_refused_naming_the_field(api, field):
    response = api.post("/api/v1/profiles/", {"manifest": {**V2, field: "gpt-5.5"}},
                        format="json")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == [f"manifest.{field}"]
    assert field in response.json()["error"]["message"]
    assert not AgentProfile.objects.filter(builtin=False).exists()


def test_a_local_profile_is_created_edited_and_deleted_as_v2(api):
    created = api.post("/api/v1/profiles", {"manifest": V2}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["slug"], body["name"], body["builtin"], body["revision"]) == \
        ("reviewer", "Reviewer", False, 1)
    assert body["manifest"] == V2
    assert api.post("/api/v1/profiles/", {"manifest": V2}, format="json").status_code == 409
    edited = api.put("/api/v1/profiles/reviewer",
                     {"manifest": {**V2, "instructions": "Read it three times."}},
                     format="json")
    assert edited.status_code == 200 and edited.json()["revision"] == 2
    bad = api.put("/api/v1/profiles/reviewer", {"manifest": {**V2, "version": 1}},
                  format="json")
    assert bad.status_code == 400
    assert AgentProfile.objects.get(slug="reviewer").instructions == "Read it three times."
    skill = api.put("/api/v1/profiles/reviewer", {"manifest": {
        **V2, "skills": [{"name": "x", "content": "y", "permissions": "all"}]}}, format="json")
    assert list(skill.json()["error"]["fields"]) == ["manifest.skills.0.permissions"]
    assert api.delete("/api/v1/profiles/reviewer").status_code == 204
    assert api.get("/api/v1/profiles/reviewer").status_code == 404


def test_a_viewer_reads_profiles_but_cannot_create_one(viewer):
    client = _client(viewer)
    assert client.get("/api/v1/profiles/").status_code == 200
    assert client.post("/api/v1/profiles/", {"manifest": V2},
                       format="json").status_code == 403


def test_bot_profiles_name_a_default_expert_and_a_launch_preset(api):
    response = api.post("/api/v1/bot-profiles/", {"slug": "helper", "name": "Helper",
                                                  "agent_profile": "claude",
                                                  "launch_preset": "claude"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["agent_profile"] == "claude"
    bad = api.post("/api/v1/bot-profiles/", {"slug": "b2", "name": "B",
                                             "agent_profile": "nope"}, format="json")
    assert bad.status_code == 400 and "agent_profile" in bad.json()["error"]["fields"]
    assert api.get("/api/v1/bot-profiles/helper").json()["launch_preset"] == "claude"


def test_a_bot_profile_is_changed_and_deleted(api):
    assert api.post("/api/v1/profiles/", {"manifest": V2, "slug": "reviewer"},
                    format="json").status_code == 201
    assert api.post("/api/v1/bot-profiles/", {"slug": "helper", "name": "Helper",
                                              "agent_profile": "claude"},
                    format="json").status_code == 201
    changed = api.patch("/api/v1/bot-profiles/helper", {"name": "Aide",
                                                        "agent_profile": "reviewer",
                                                        "launch_preset": "pi"}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["name"], changed.json()["agent_profile"],
            changed.json()["launch_preset"]) == ("Aide", "reviewer", "pi")
    assert BotProfile.objects.get(slug="helper").name == "Aide"
    # the expert a bot names stays while the bot does
    assert api.delete("/api/v1/profiles/reviewer").status_code == 409
    assert api.delete("/api/v1/bot-profiles/helper").status_code == 204
    assert not BotProfile.objects.filter(slug="helper").exists()
    assert api.delete("/api/v1/bot-profiles/helper").status_code == 404
    assert api.delete("/api/v1/profiles/reviewer").status_code == 204


def test_presets_are_amux_s_and_an_operator_edits_them(api, viewer, openai_provider):
    presets = {p["slug"]: p for p in api.get("/api/v1/launch-presets/").json()["results"]}
    assert set(presets) == {"codex", "claude", "pi"}
    assert [s for s, p in presets.items() if p["is_default"]] == ["codex"]
    assert all(p["permission"] == "bypass" for p in presets.values())
    changed = api.patch("/api/v1/launch-presets/pi", {"model": "scripted-model",
                                                      "provider": "scripted",
                                                      "is_default": True}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["is_default"] and changed.json()["provider"] == "scripted"
    assert list(LaunchPreset.objects.filter(is_default=True).values_list("slug", flat=True)) \
        == ["pi"]
    bad = api.patch("/api/v1/launch-presets/pi", {"permission": "yolo"}, format="json")
    assert bad.status_code == 400 and "permission" in bad.json()["error"]["fields"]
    # the default cannot be unset, only moved: the request contradicts the stored state
    kept = api.patch("/api/v1/launch-presets/pi", {"is_default": False}, format="json")
    assert kept.status_code == 409 and list(kept.json()["error"]["fields"]) == ["is_default"]
    assert _client(viewer).patch("/api/v1/launch-presets/pi", {"model": "x"},
                                 format="json").status_code == 403


def test_a_direct_session_without_permission_runs_with_the_native_bypass(
        api, openai_provider, session_dirs):
    body = api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                         "model": "gpt-5.5"}, format="json").json()
    frozen = body["snapshot"]["execution"]
    assert frozen["launch"] == "direct"
    assert frozen["permission"] == {"mode": "bypass", "source": "native-default",
                                    "policy": None,
                                    "native": {"approval_policy": "never",
                                               "sandbox_mode": "danger-full-access"}}
    assert (frozen["isolation"], frozen["sandbox"]) == (
        isolation.selected_backend(),
        "bwrap" if isolation.selected_backend() == "bwrap" else "danger-full-access")
    explicit = api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                             "model": "gpt-5.5", "permission_mode": "ask"},
                        format="json").json()["snapshot"]["execution"]["permission"]
    assert (explicit["mode"], explicit["source"]) == ("ask", "explicit")
    assert explicit["native"]["approval_policy"] == "on-request"


def test_a_shortcut_preset_keeps_its_runtime_model_and_permission(api, anthropic_provider,
                                                                  session_dirs):
    LaunchPreset.objects.all().delete()
    api.get("/api/v1/launch-presets/")  # the built-in presets again
    LaunchPreset.objects.filter(slug="claude").update(permission="ask")
    body = api.post("/api/v1/sessions", {"preset": "claude"}, format="json")
    assert body.status_code == 201, body.content
    frozen = body.json()["snapshot"]["execution"]
    assert (frozen["runtime"], frozen["model"], frozen["provider"], frozen["preset"]) == \
        ("claude", "claude-sonnet-4-5", "scripted", "claude")
    assert frozen["permission"]["mode"] == "ask" and frozen["permission"]["source"] == "preset"
    assert frozen["permission"]["native"] == {"permission_mode": "default"}
    # an explicit native argument wins over the shortcut's
    body = api.post("/api/v1/sessions", {"preset": "claude", "permission_mode": "bypass",
                                         "model": "claude-opus-4-1"}, format="json").json()
    assert body["snapshot"]["execution"]["permission"]["source"] == "explicit"
    assert body["snapshot"]["execution"]["model"] == "claude-opus-4-1"
    refused = api.post("/api/v1/sessions", {"preset": "claude", "extra_args": ["--x"]},
                       format="json")
    assert refused.status_code == 400 and "extra_args" in refused.json()["error"]["fields"]


def test_a_task_freezes_policy_allow_and_the_default_preset(api, openai_provider,
                                                            session_dirs):
    response = api.post("/api/v1/tasks/", {"prompt": "hello"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "queued" and body["result"] == "" and body["session"]
    assert (body["execution"]["runtime"], body["execution"]["model"],
            body["execution"]["provider"]) == ("codex", "gpt-5.5", "scripted")
    assert body["execution"]["permission"]["mode"] == execution.DEFAULT_TASK_POLICY
    child = Session.objects.get(pk=body["session"])
    assert child.snapshot["execution"] == body["execution"]
    assert child.turns.get().key == f"task:{body['id']}"
    explicit = api.post("/api/v1/tasks/", {"prompt": "hi", "runtime": "pi",
                                           "model": "scripted-model",
                                           "extra_args": ["--no-skills"],
                                           "permission_policy": "policy-deny"},
                        format="json").json()
    assert (explicit["execution"]["runtime"], explicit["execution"]["model"],
            explicit["execution"]["extra_args"], explicit["execution"]["preset"]) == \
        ("pi", "scripted-model", ["--no-skills"], None)
    assert explicit["execution"]["permission"]["mode"] == "policy-deny"


@pytest.mark.parametrize("body, field", [
    ({"prompt": ""}, "prompt"),
    ({"prompt": "x", "runtime": "nope"}, "runtime"),
    ({"prompt": "x", "profile": "nope"}, "profile"),
    ({"prompt": "x", "permission_policy": "yolo"}, "permission_policy"),
    ({"prompt": "x", "extra_args": "--flag"}, "extra_args"),
    ({"prompt": "x", "provider": "nope"}, "provider"),
])
def test_a_bad_task_is_refused_naming_the_field_and_keeps_nothing(api, openai_provider,
                                                                  session_dirs, body, field):
    response = api.post("/api/v1/tasks/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not TaskRun.objects.exists() and not Session.objects.exists()


def test_a_caller_sees_only_its_own_tasks_and_instances(api, operator, django_user_model,
                                                        openai_provider, session_dirs):
    other = django_user_model.objects.create_user("other", password="x", is_staff=True)
    mine = api.post("/api/v1/tasks/", {"prompt": "mine"}, format="json").json()
    client = _client(other)
    theirs = client.post("/api/v1/tasks/", {"prompt": "theirs"}, format="json").json()
    assert [t["id"] for t in api.get("/api/v1/tasks/").json()["results"]] == [mine["id"]]
    assert api.get(f"/api/v1/tasks/{theirs['id']}").status_code == 404
    agent = client.post("/api/v1/instances/", {"name": "solo", "runtime": "codex",
                                               "model": "gpt-5.5"}, format="json")
    assert agent.status_code == 201, agent.content
    agent_id = agent.json()["id"]
    assert api.get("/api/v1/instances/").json()["count"] == 0
    assert api.get(f"/api/v1/instances/{agent_id}").status_code == 404
    assert api.post(f"/api/v1/instances/{agent_id}/tasks", {"prompt": "x"},
                    format="json").status_code == 404
    assert TaskRun.objects.filter(instance_id=agent_id).count() == 0


def test_instance_tasks_queue_on_its_one_session(api, openai_provider, session_dirs):
    created = api.post("/api/v1/instances", {"name": "keeper", "profile": "codex",
                                             "runtime": "codex", "model": "gpt-5.5"},
                       format="json")
    assert created.status_code == 201, created.content
    agent = created.json()
    assert agent["profile"] == "codex" and agent["execution"]["runtime"] == "codex"
    assert api.post("/api/v1/instances", {"name": "keeper"},
                    format="json").status_code == 409
    first = api.post(f"/api/v1/instances/{agent['id']}/tasks", {"prompt": "one"},
                     format="json").json()
    second = api.post(f"/api/v1/instances/{agent['id']}/tasks/", {"prompt": "two"},
                      format="json").json()
    # one session for both; the second waits in its queue behind the first
    assert first["session"] == second["session"] == agent["session"]
    assert (first["state"], second["state"]) == ("queued", "queued")
    assert list(Session.objects.get(pk=agent["session"]).turns.order_by("seq")
                .values_list("key", flat=True)) == [f"task:{first['id']}",
                                                    f"task:{second['id']}"]
    listed = api.get(f"/api/v1/instances/{agent['id']}/tasks").json()
    assert {t["id"] for t in listed["results"]} == {first["id"], second["id"]}
    assert AgentInstance.objects.get().session_id == agent["session"]


def test_a_patch_without_the_manifest_changes_nothing(api):
    made = api.post("/api/v1/profiles/", {"manifest": V2}, format="json").json()
    same = api.patch(f"/api/v1/profiles/{made['slug']}/", {}, format="json")
    assert same.status_code == 200, same.content
    assert same.json()["revision"] == made["revision"]
    assert same.json()["manifest"] == made["manifest"]
    changed = api.patch(f"/api/v1/profiles/{made['slug']}/",
                        {"manifest": {**V2, "instructions": "Read it once."}}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["manifest"]["instructions"] == "Read it once."
    builtin = api.patch("/api/v1/profiles/pi/", {}, format="json")
    assert builtin.status_code == 403 and builtin.json()["error"]["code"] == "builtin"


@pytest.mark.parametrize("slug", ["  ", "--", "My Expert", "é"])
def test_an_expert_s_explicit_slug_must_already_be_one(api, slug):
    """The document's pattern is the rule: letters, digits, '-' and '_', one letter or digit
    at least (before, a slug was slugified, so white space alone failed only after)."""
    response = api.post("/api/v1/profiles/", {"manifest": V2, "slug": slug}, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["fields"]) == ["slug"]
