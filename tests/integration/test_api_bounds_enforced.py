"""A value one over a bound is refused with 400 naming the field, and one exactly at the
bound is not refused for its size (issue 33, item 5): a string, a list, an integer and a
map, on an operation of every app. The document's side is test_api_bounds.py."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from amux_common import limits as common
from goals import limits as goal_limits
from intake import limits as intake_limits
from intake.models import Source
from policy import limits as policy_limits
from prompts_app import limits as prompt_limits
from runtimes import catalog
from sessions import limits as session_limits
from tickets import limits as ticket_limits

pytestmark = pytest.mark.django_db


def longer(n: int) -> str:
    return "x" * n


def string_over(n: int) -> list[str]:
    return [f"Ensure this field has no more than {n} characters."]


def list_over(n: int) -> list[str]:
    return [f"Ensure this field has no more than {n} elements."]


def int_over(n: int) -> list[str]:
    return [f"Ensure this value is less than or equal to {n}."]


def refused(response, field: str):
    """The error's words for ``field`` in a 400 in the one error shape."""
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    return error["fields"][field]


def not_refused_for_size(response, field: str) -> None:
    """At the bound: accepted, or refused for something else than ``field``'s size (an
    operation that needs a runtime or a provider this test does not set up)."""
    if response.status_code < 300:
        return
    fields = response.json()["error"]["fields"]
    assert "no more than" not in str(fields.get(field, "")), fields
    assert "less than or equal" not in str(fields.get(field, "")), fields


# --- goals: a string and an integer ------------------------------------------------------

def test_goal_title_and_quota(api):
    n = goal_limits.GOAL_TITLE
    over = api.post("/api/v1/goals/", {"slug": "a", "title": longer(n + 1)}, format="json")
    assert refused(over, "title") == string_over(n)
    assert api.post("/api/v1/goals/", {"slug": "a", "title": longer(n)},
                    format="json").status_code == 201

    top = goal_limits.POSITIVE_INT_MAX
    over = api.post("/api/v1/goals/", {"slug": "b", "title": "B",
                                       "quota": {"unit": "turns", "limit": top + 1}},
                    format="json")
    assert refused(over, "quota.limit") == int_over(top)
    assert api.post("/api/v1/goals/", {"slug": "b", "title": "B",
                                       "quota": {"unit": "turns", "limit": top}},
                    format="json").status_code == 201


# --- connectors: a slug ------------------------------------------------------------------

def test_connector_goal_slug(api):
    n = common.SLUG
    slug = "g" * n
    assert api.post("/api/v1/goals/", {"slug": slug, "title": "Long"},
                    format="json").status_code == 201
    body = {"source_kind": "web_chat", "ingress_mode": "live_steering"}
    over = api.post("/api/v1/connectors/", {**body, "goal": slug + "g"}, format="json")
    assert refused(over, "goal") == string_over(n)
    not_refused_for_size(api.post("/api/v1/connectors/", {**body, "goal": slug},
                                  format="json"), "goal")


# --- sources: a map ----------------------------------------------------------------------

def test_source_config_keys(api):
    n = intake_limits.CONFIG_KEYS
    base = {"kind": "github", "slug": "gh", "name": "Repo"}
    config = {f"k{i}": 1 for i in range(n + 1)}
    over = api.post("/api/v1/sources/", {**base, "config": config}, format="json")
    assert refused(over, "config") == [
        f"Ensure this object has no more than {n} keys (it has {n + 1})."]
    config.pop(f"k{n}")
    not_refused_for_size(api.post("/api/v1/sources/", {**base, "config": config},
                                  format="json"), "config")
    assert not Source.objects.exists()


# --- providers: a list and a string ------------------------------------------------------

def test_provider_models_and_key(api):
    base = {"slug": "gw", "platform": "openai-compat", "base_url": "http://127.0.0.1:9/v1"}
    n = catalog.MAX_MODELS
    over = api.post("/api/v1/providers/", {**base, "models": [f"m{i}" for i in range(n + 1)]},
                    format="json")
    assert refused(over, "models") == list_over(n)
    key = session_limits.API_KEY
    over = api.post("/api/v1/providers/", {**base, "api_key": "sk-" + longer(key)},
                    format="json")
    assert refused(over, "api_key") == string_over(key)
    made = api.post("/api/v1/providers/", {**base, "models": [f"m{i}" for i in range(n)]},
                    format="json")
    assert made.status_code == 201, made.content
    assert len(made.json()["models"]) == n


# --- policy: a map and a string ----------------------------------------------------------

@pytest.fixture
def gh(db):
    return Source.objects.create(kind="github", slug="gh", name="Our repo",
                                 config={"repo": "acme/app", "handle": "amux-bot"})


def test_policy_sources_and_actor(api, gh):
    n = policy_limits.MAX_SOURCES
    sources = {f"s{i}": {} for i in range(n + 1)}
    over = api.put("/api/v1/policy/", {"base_version": None, "acceptance": "manual",
                                       "sources": sources}, format="json")
    assert "no more than 100 keys" in str(refused(over, "sources"))
    saved = api.put("/api/v1/policy/", {"base_version": None, "acceptance": "manual",
                                        "sources": {"gh": {}}}, format="json")
    assert saved.status_code == 200, saved.content

    a = policy_limits.ACTOR
    facts = {"source": "gh", "scope": "comment", "addressed": True}
    over = api.post("/api/v1/policy/check/", {**facts, "actor": longer(a + 1)}, format="json")
    assert refused(over, "actor") == string_over(a)
    assert api.post("/api/v1/policy/check/", {**facts, "actor": longer(a)},
                    format="json").status_code == 200


# --- prompts: an integer and a string ----------------------------------------------------

def test_prompt_base_revision_and_text(api):
    listed = api.get("/api/v1/prompts/").json()
    key = listed["results"][0]["key"]
    revision = listed.get("revision", 0)
    top = prompt_limits.REVISION_MAX
    over = api.put(f"/api/v1/prompts/{key}/", {"text": "x", "base_revision": top + 1},
                   format="json")
    assert refused(over, "base_revision") == int_over(top)
    at = api.put(f"/api/v1/prompts/{key}/", {"text": "x", "base_revision": top},
                 format="json")
    # a revision nobody saved: refused for that, not for its size
    assert "There is no revision" in str(refused(at, "base_revision"))

    n = prompt_limits.TEXT
    over = api.put(f"/api/v1/prompts/{key}/", {"text": longer(n + 1), "base_revision": revision},
                   format="json")
    assert refused(over, "text") == string_over(n)
    saved = api.put(f"/api/v1/prompts/{key}/", {"text": longer(n), "base_revision": revision},
                    format="json")
    assert saved.status_code == 200, saved.content


# --- sessions, tasks, schedules, instances: lists, maps and strings ----------------------

def test_session_extra_args_and_watchdog(api):
    n = session_limits.ARGS
    base = {"runtime": "pi", "model": "m"}
    over = api.post("/api/v1/sessions/", {**base, "extra_args": ["-v"] * (n + 1)},
                    format="json")
    assert refused(over, "extra_args") == list_over(n)
    over = api.post("/api/v1/sessions/", {**base, "extra_args": [longer(common.ARG + 1)]},
                    format="json")
    assert refused(over, "extra_args.0") == string_over(common.ARG)
    not_refused_for_size(api.post("/api/v1/sessions/", {**base, "extra_args": ["-v"] * n},
                                  format="json"), "extra_args")

    # a watchdog holds its four listed limits, each within its range, and nothing else
    watchdog = {f"w{i}": 1 for i in range(5)}
    over = api.post("/api/v1/sessions/", {**base, "watchdog": watchdog}, format="json")
    assert all(refused(over, f"watchdog.w{i}") == ["unknown field"] for i in range(5))


def test_task_prompt(api):
    n = session_limits.PROMPT
    assert refused(api.post("/api/v1/tasks/", {"prompt": longer(n + 1)}, format="json"),
                   "prompt") == string_over(n)
    not_refused_for_size(api.post("/api/v1/tasks/", {"prompt": longer(n)}, format="json"),
                         "prompt")


def test_schedule_extra_args(api):
    n = session_limits.ARGS
    body = {"name": "nightly", "every_seconds": 60, "mode": "subtask", "prompt": "go"}
    over = api.post("/api/v1/schedules/", {**body, "extra_args": ["-v"] * (n + 1)},
                    format="json")
    assert refused(over, "extra_args") == list_over(n)
    not_refused_for_size(api.post("/api/v1/schedules/", {**body, "extra_args": ["-v"] * n},
                                  format="json"), "extra_args")


def test_instance_name_and_model(api):
    n = session_limits.MODEL
    over = api.post("/api/v1/instances/", {"name": "solo", "model": longer(n + 1)},
                    format="json")
    assert refused(over, "model") == string_over(n)
    not_refused_for_size(api.post("/api/v1/instances/", {"name": "solo", "model": longer(n)},
                                  format="json"), "model")


# --- experts: a map in keys and in bytes -------------------------------------------------

V2 = {"version": 2, "name": "Reviewer", "description": "reviews diffs",
      "instructions": "Read the diff twice.", "skills": []}


def test_profile_manifest_keys_and_bytes(api):
    n = session_limits.MANIFEST_KEYS
    manifest = {**V2, **{f"x{i}": 1 for i in range(n + 1 - len(V2))}}
    over = api.post("/api/v1/profiles/", {"manifest": manifest}, format="json")
    assert refused(over, "manifest") == [
        f"Ensure this object has no more than {n} keys (it has {n + 1})."]
    size = session_limits.MANIFEST_BYTES
    over = api.post("/api/v1/profiles/", {"manifest": {**V2, "instructions": longer(size)}},
                    format="json")
    assert "bytes as JSON" in str(refused(over, "manifest"))
    made = api.post("/api/v1/profiles/", {"manifest": V2}, format="json")
    assert made.status_code == 201, made.content


# --- memory: a string --------------------------------------------------------------------

def test_memory_text(api):
    n = session_limits.MEMORY_TEXT
    over = api.post("/api/v1/memory/", {"title": "t", "text": longer(n + 1)}, format="json")
    assert refused(over, "text") == string_over(n)
    assert api.post("/api/v1/memory/", {"title": "t", "text": longer(n)},
                    format="json").status_code == 201


# --- the executor's tools (tickets): a list and an id ------------------------------------

@pytest.fixture
def worker(db):
    from tests import factories as f
    from tickets.actions import commands, executor
    from tickets.models import Assignment

    trigger = f.TriggerFactory(thread__key="octo/app#1", external_id="c1", text="fix",
                               addressed=False, rule="")
    ticket = commands.open_ticket(trigger_id=trigger.pk, title="Fix")
    token = executor.issue_assignment_token(
        assignment_id=Assignment.objects.get(ticket=ticket).pk)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_tool_ask_options_and_assignment(worker):
    n = ticket_limits.QUESTION_OPTIONS
    over = worker.post("/api/v1/tools/ask/", {"question": "Which?",
                                              "options": [f"o{i}" for i in range(n + 1)]},
                       format="json")
    assert refused(over, "options") == list_over(n)
    over = worker.post("/api/v1/tools/report/", {"status": "progress",
                                                 "assignment": common.ID_MAX + 1},
                       format="json")
    assert refused(over, "assignment") == int_over(common.ID_MAX)
    asked = worker.post("/api/v1/tools/ask/", {"question": "Which?",
                                               "options": [f"o{i}" for i in range(n)]},
                        format="json")
    assert asked.status_code == 201, asked.content
