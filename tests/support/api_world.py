"""One stored row of each kind the REST API names, made through the API itself (so each is
a row a user could have made) where the API makes it, else with the factories: the API fuzz
steers generated path parameters and reference fields to these, so a detail, update or
action operation meets something that exists instead of answering 404 to a random name.

`build(client)` returns the names by what they name (`World`); a missing entry means the
kind could not be made here and its operations keep their generated values."""

from __future__ import annotations

from typing import Any

from tests import factories as f

World = dict[str, Any]

SOURCE = "fuzz-github"
PROVIDER = "fuzz-provider"
GOAL = "fuzz-goal"
AGENT = "fuzz-agent"
EXPERT = "fuzz-expert"
BOT_PROFILE = "fuzz-bot"
PRESET = "pi"  # a built-in launch preset (amux owns presets; none is created by the API)
RUNTIME = "pi"
MODEL = "fuzz-model"
MANIFEST = {"version": 2, "name": "Fuzz expert", "description": "fuzz",
            "instructions": "Answer.", "skills": []}


def _made(response, what: str) -> dict:
    assert response.status_code in (200, 201), (what, response.status_code, response.content)
    return response.json()


def build(client) -> World:
    world: World = {"runtime": RUNTIME, "model": MODEL, "preset": PRESET}

    def post(path: str, body: dict) -> dict:
        return _made(client.post(path, body, format="json"), path)

    world["source"] = post("/api/v1/sources/", {
        "kind": "github", "slug": SOURCE, "name": "Fuzz repo",
        "config": {"repo": "octo/fuzz"}})["slug"]
    world["provider"] = post("/api/v1/providers/", {
        "slug": PROVIDER, "platform": "openai-compat", "base_url": "http://127.0.0.1:9/v1",
        "api_key": "sk-fuzz", "models": [MODEL]})["slug"]
    world["goal"] = post("/api/v1/goals/", {"slug": GOAL, "title": "Fuzz goal"})["slug"]
    world["agent"] = post(f"/api/v1/goals/{GOAL}/agents/", {
        "slug": AGENT, "mode": "managed_agent_runtime", "provider": PROVIDER,
        "model": MODEL})["slug"]
    world["connector"] = post("/api/v1/connectors/", {
        "goal": GOAL, "agent": AGENT, "source_kind": "web_chat",
        "ingress_mode": "session_queue"})["id"]
    world["todo"] = post(f"/api/v1/goals/{GOAL}/todos/", {"title": "Fuzz todo"})["id"]
    world["expert"] = post("/api/v1/profiles/", {"slug": EXPERT, "manifest": MANIFEST})["slug"]
    world["bot_profile"] = post("/api/v1/bot-profiles/", {
        "slug": BOT_PROFILE, "name": "Fuzz bot", "agent_profile": world["expert"],
        "launch_preset": PRESET})["slug"]
    world["memory"] = post("/api/v1/memory/", {"title": "Fuzz", "text": "remember"})["id"]
    world["schedule"] = post("/api/v1/schedules/", {
        "name": "fuzz", "every_seconds": 60, "mode": "subtask", "prompt": "Summarise.",
        "runtime": RUNTIME, "provider": PROVIDER, "model": MODEL})["id"]
    world["instance"] = post("/api/v1/instances/", {
        "name": "fuzz", "runtime": RUNTIME, "provider": PROVIDER, "model": MODEL})["id"]
    world["task"] = post("/api/v1/tasks/", {"prompt": "hello", "runtime": RUNTIME,
                                            "provider": PROVIDER, "model": MODEL})["id"]
    world["session"] = post("/api/v1/sessions/", {"runtime": RUNTIME, "provider": PROVIDER,
                                                  "model": MODEL})["id"]
    # two policy versions and two prompt revisions: a diff names two stored ones
    for acceptance in ("manual", "auto"):
        base = _made(client.get("/api/v1/policy/"), "policy")["version"]
        _made(client.put("/api/v1/policy/", {"base_version": base, "acceptance": acceptance,
                                             "sources": {}}, format="json"), "policy")
    versions = _made(client.get("/api/v1/policy/versions/"), "policy versions")["results"]
    world["policy_version_first"] = versions[-1]["version"]
    world["policy_version"] = _made(client.get("/api/v1/policy/"), "policy")["version"]
    world["prompt"] = _made(client.get("/api/v1/prompts/"), "prompts")["results"][0]["key"]
    for text in ("We build amux.", "We build amux, carefully."):
        base = _made(client.get("/api/v1/prompts/"), "prompts")["revision"]
        _made(client.put(f"/api/v1/prompts/{world['prompt']}/",
                         {"base_revision": base, "text": text}, format="json"), "prompt")
    world["prompt_revision"] = _made(client.get("/api/v1/prompts/"), "prompts")["revision"]
    world["prompt_revision_first"] = world["prompt_revision"] - 1
    trigger = f.TriggerFactory(source=f.SourceFactory(slug="fuzz-trigger-source"))
    world["trigger"] = trigger.pk
    world["ticket"] = f.TicketFactory(thread=trigger.thread).pk
    return world
