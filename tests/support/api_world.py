"""One stored row of each kind the REST API names, made through the API itself (so each is
a row a user could have made) where the API makes it, else with the factories: the API fuzz
steers generated path parameters and reference fields to these, so a detail, update or
action operation meets something that exists instead of answering 404 to a random name.

`World(client)` gives the names by what they name, making each row when first asked; a
kind not made here gives None and its operations keep their generated values."""

from __future__ import annotations

from typing import Any

from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from tests import factories as f

SOURCE = "fuzz-github"
PROVIDER = "fuzz-provider"
GOAL = "fuzz-goal"
AGENT = "fuzz-agent"
EXPERT = "fuzz-expert"
BOT_PROFILE = "fuzz-bot"
LARK_GROUP = "oc_fuzz"
PRESET = "pi"  # a built-in launch preset (amux owns presets; none is created by the API)
RUNTIME = "pi"
MODEL = "fuzz-model"
MANIFEST = {"version": 2, "name": "Fuzz expert", "description": "fuzz",
            "instructions": "Answer.", "skills": []}


def hold_test_connection() -> None:
    """The WSGI handler closes the database connection after each request (as it should in
    production); in a test that would close the test transaction's connection. Django's own
    test client disconnects the same handler around its requests."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)


def release_test_connection() -> None:
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def stop_app_servers() -> None:
    """App-servers a case started are stopped (their processes outlive the test's
    rolled-back rows otherwise)."""
    from sessions import app_servers
    from sessions.models import AppServer

    for row in AppServer.objects.filter(origin="spawned").exclude(state="stopped"):
        if row.pid:
            app_servers._kill(row.pid, row.ref)


def _made(response, what: str) -> dict:
    assert response.status_code in (200, 201), (what, response.status_code, response.content)
    return response.json()


class World:
    """The stored rows, each made the first time a case asks for it (its dependencies
    first): an operation pays only for the rows it names. `get(name)` is the stored name
    or id, None for a name of no kind made here."""

    def __init__(self, client):
        self._client = client
        self._made: dict[str, Any] = {"runtime": RUNTIME, "model": MODEL, "preset": PRESET}
        self._workdirs = 0
        self._slugs: set[str] = set()

    def fresh_workdir(self) -> str:
        """A directory no session holds yet, under the data directory's work/ (where a
        session's or app-server's work directory must be): a new one each time."""
        from django.conf import settings

        self._workdirs += 1
        return f"{settings.WORK_DIR}/fuzz-{self._workdirs}"

    def image(self, mime: str) -> str | None:
        """A one-pixel image of that MIME type, base64 (None for a type amux refuses)."""
        import base64
        import io

        from PIL import Image

        from sessions.content import MIME_FORMATS

        if not isinstance(mime, str) or mime not in MIME_FORMATS:
            return None
        out = io.BytesIO()
        Image.new("RGB", (1, 1)).save(out, format=MIME_FORMATS[mime])
        return base64.b64encode(out.getvalue()).decode()

    def fresh_slug(self, slug: str, max_length: int) -> str:
        """The generated slug of a create, or one like it when an earlier case took it (a
        taken slug is refused, rightly: it names a stored row, not the generated one)."""
        n = 1
        fresh = slug
        while fresh.lower() in self._slugs:
            n += 1
            suffix = f"-{n}"
            fresh = slug[:max_length - len(suffix)] + suffix
        self._slugs.add(fresh.lower())
        return fresh

    def _post(self, path: str, body: dict) -> dict:
        return self._answer(self._client.post(path, body, format="json"), path)

    def _get(self, path: str) -> dict:
        return self._answer(self._client.get(path), path)

    def _put(self, path: str, body: dict) -> dict:
        return self._answer(self._client.put(path, body, format="json"), path)

    @staticmethod
    def _answer(response, what: str) -> dict:
        # Rows are made mid-test, while the fuzz holds the test transaction's connection
        # (the WSGI handler would close it after each request); Django's test client
        # connects the closing handler again after each of its requests.
        hold_test_connection()
        return _made(response, what)

    def get(self, name: str):
        if name not in self._made:
            make = getattr(self, f"_make_{name}", None)
            if make is None:
                return None
            make()
        return self._made[name]

    def __getitem__(self, name: str):
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def _make_source(self):
        self._made["source"] = self._post("/api/v1/sources/", {
            "kind": "github", "slug": SOURCE, "name": "Fuzz repo",
            "config": {"repo": "octo/fuzz"}})["slug"]

    def _make_webchat_source(self):
        self._made["webchat_source"] = self._post("/api/v1/sources/", {
            "kind": "webchat", "slug": "fuzz-webchat", "name": "Fuzz chat",
            "config": {}})["slug"]

    def _make_lark_source(self):
        # a Lark source with one configured group: made with the factory (the API would
        # verify the app against Lark first)
        self._made["lark_source"] = f.SourceFactory(
            kind="lark", slug="fuzz-lark", name="Fuzz Lark",
            config={"app_id": "cli_fuzz", "groups": [LARK_GROUP]}).slug

    def _make_provider(self):
        self._made["provider"] = self._post("/api/v1/providers/", {
            "slug": PROVIDER, "platform": "openai-compat",
            "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-fuzz",
            "models": [MODEL]})["slug"]

    def _make_goal(self):
        self._made["goal"] = self._post("/api/v1/goals/", {"slug": GOAL,
                                                           "title": "Fuzz goal"})["slug"]

    def _make_agent(self):
        self._made["agent"] = self._post(f"/api/v1/goals/{self['goal']}/agents/", {
            "slug": AGENT, "mode": "managed_agent_runtime", "provider": self["provider"],
            "model": MODEL})["slug"]

    def _make_connector(self):
        self._made["connector"] = self._post("/api/v1/connectors/", {
            "goal": self["goal"], "agent": self["agent"], "source_kind": "web_chat",
            "ingress_mode": "session_queue"})["id"]

    def _make_todo(self):
        self._made["todo"] = self._post(f"/api/v1/goals/{self['goal']}/todos/",
                                        {"title": "Fuzz todo"})["id"]

    def _make_expert(self):
        self._made["expert"] = self._post("/api/v1/profiles/", {
            "slug": EXPERT, "manifest": MANIFEST})["slug"]

    def _make_bot_profile(self):
        self._made["bot_profile"] = self._post("/api/v1/bot-profiles/", {
            "slug": BOT_PROFILE, "name": "Fuzz bot", "agent_profile": self["expert"],
            "launch_preset": PRESET})["slug"]

    def _make_memory(self):
        self._made["memory"] = self._post("/api/v1/memory/", {"title": "Fuzz",
                                                              "text": "remember"})["id"]

    def _make_schedule(self):
        self._made["schedule"] = self._post("/api/v1/schedules/", {
            "name": "fuzz", "every_seconds": 60, "mode": "subtask", "prompt": "Summarise.",
            "runtime": RUNTIME, "provider": self["provider"], "model": MODEL})["id"]

    def _make_instance(self):
        self._made["instance"] = self._post("/api/v1/instances/", {
            "name": "fuzz", "runtime": RUNTIME, "provider": self["provider"],
            "model": MODEL})["id"]

    def _make_task(self):
        self._made["task"] = self._post("/api/v1/tasks/", {
            "prompt": "hello", "runtime": RUNTIME, "provider": self["provider"],
            "model": MODEL})["id"]

    def _make_session(self):
        self._made["session"] = self._post("/api/v1/sessions/", {
            "runtime": RUNTIME, "provider": self["provider"], "model": MODEL})["id"]

    def _make_policy_version(self):
        # two versions: a diff names two stored ones
        for acceptance in ("manual", "auto"):
            base = self._get("/api/v1/policy/")["version"]
            self._put("/api/v1/policy/", {"base_version": base, "acceptance": acceptance,
                                          "sources": {}})
        versions = self._get("/api/v1/policy/versions/")["results"]
        self._made["policy_version_first"] = versions[-1]["version"]
        self._made["policy_version"] = versions[0]["version"]

    _make_policy_version_first = _make_policy_version

    def _make_prompt(self):
        self._made["prompt"] = self._get("/api/v1/prompts/")["results"][0]["key"]

    def _make_prompt_overridden(self):
        # a built-in fragment with an override: what "keep mine" keeps and restore clears
        fragments = self._get("/api/v1/prompts/?limit=200")
        key = next(f["key"] for f in fragments["results"]
                   if f["kind"] == "builtin" and f["editable"])
        self._put(f"/api/v1/prompts/{key}/", {"base_revision": fragments["revision"],
                                              "text": "Ours, carefully."})
        self._made["prompt_overridden"] = key

    def _make_prompt_revision(self):
        # two revisions: a diff names two stored ones
        for text in ("We build amux.", "We build amux, carefully."):
            base = self._get("/api/v1/prompts/")["revision"]
            self._put(f"/api/v1/prompts/{self['prompt']}/", {"base_revision": base,
                                                             "text": text})
        self._made["prompt_revision"] = self._get("/api/v1/prompts/")["revision"]
        self._made["prompt_revision_first"] = self._made["prompt_revision"] - 1

    _make_prompt_revision_first = _make_prompt_revision

    def _make_trigger(self):
        trigger = f.TriggerFactory(source=f.SourceFactory(slug="fuzz-trigger-source"))
        self._made["trigger"] = trigger.pk
        self._made["ticket"] = f.TicketFactory(thread=trigger.thread).pk

    _make_ticket = _make_trigger
