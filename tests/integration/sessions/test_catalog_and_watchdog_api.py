"""REST runtimes/<name>/models (real Codex binary), the provider model list with display
names and efforts, settings/watchdog and providers' watchdog, and what a new session
freezes: refusals name the field and keep nothing."""

from __future__ import annotations

import pytest

from runtimes import catalog
from sessions import services
from sessions.models import ProviderProfile, Session, TimelineEvent, WatchdogSettings
from sessions.new_session import Launch
from tests.support.model_server import ToolCall
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(240)]


def _field_error(response, field):
    assert response.status_code == 400, response.content
    body = response.json()["error"]
    assert field in body["fields"], body
    return body


# ------------------------------------------------------------------------ model catalog
def test_codex_without_login_or_provider_says_not_logged_in(api, session_dirs):
    response = api.get("/api/v1/runtimes/codex/models")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {"runtime": "codex", "provider": None, "status": "not_logged_in",
                    "source": "native", "message": body["message"], "models": []}
    assert "not logged in" in body["message"]
    # the identity is the runtime's own private HOME under the data directory
    assert (session_dirs / "runtime" / "identity-codex" / "home" / ".codex").is_dir()


def test_a_provider_binding_lists_the_providers_models(api, openai_provider, session_dirs):
    saved = api.patch("/api/v1/providers/scripted", {"models": [
        "scripted-model",
        {"name": "deep-model", "display_name": "Deep thinker", "efforts": ["low", "high"]}]},
        format="json")
    assert saved.status_code == 200, saved.content
    assert saved.json()["models"][0] == "scripted-model"  # bare names stay bare
    body = api.get("/api/v1/runtimes/codex/models?provider=scripted").json()
    assert body["status"] == "ok" and body["source"] == "provider"
    assert [(m["ref"], m["display_name"], m["efforts"]) for m in body["models"]] == [
        ("scripted-model", "scripted-model", []),
        ("deep-model", "Deep thinker", ["low", "high"])]
    # the bundled Codex list (what model/list answers under a provider) is not mixed in
    assert all(not m["ref"].startswith("gpt-6") for m in body["models"])


def test_catalog_refusals(api, openai_provider, session_dirs):
    assert api.get("/api/v1/runtimes/emacs/models").status_code == 404
    _field_error(api.get("/api/v1/runtimes/codex/models?provider=nope"), "provider")
    _field_error(api.get("/api/v1/runtimes/claude/models?provider=scripted"), "provider")
    pi = api.get("/api/v1/runtimes/pi/models").json()
    assert pi["status"] == "unsupported" and pi["models"] == []


@pytest.mark.parametrize("models", ["m1", [{"name": "a", "efforts": "high"}], ["a", "a"],
                                    [{"name": "a", "colour": "red"}]])
def test_bad_provider_model_lists_are_refused(api, openai_provider, models):
    _field_error(api.patch("/api/v1/providers/scripted", {"models": models}, format="json"),
                 "models")
    assert ProviderProfile.objects.get(slug="scripted").model_names == ["gpt-5.5"]


def test_efforts_are_limited_to_what_the_catalog_declares(api, openai_provider,
                                                          session_dirs):
    openai_provider.model_names = [{"name": "deep-model", "efforts": ["low", "high"]},
                                   "free-model"]
    openai_provider.save()
    body = _field_error(api.post("/api/v1/sessions", {
        "runtime": "codex", "provider": "scripted", "model": "deep-model",
        "effort": "xhigh"}, format="json"), "effort")
    assert body["code"] == "invalid_effort" and "low, high" in body["message"]
    ok = api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                       "model": "deep-model", "effort": "high"}, format="json")
    assert ok.status_code == 201, ok.content
    assert ok.json()["model_display_name"] == "deep-model"  # no display name: the ref
    openai_provider.model_names = [{"name": "deep-model", "display_name": "Deep thinker"}]
    openai_provider.save()
    shown = api.get(f"/api/v1/sessions/{ok.json()['id']}").json()
    assert shown["model"] == "deep-model" and shown["model_display_name"] == "Deep thinker"
    # no efforts declared: the runtime checks the effort when it runs
    free = api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                         "model": "free-model", "effort": "xhigh"},
                    format="json")
    assert free.status_code == 201
    assert Session.objects.count() == 2


def test_native_variant_references_are_opaque_and_checked(api, openai_provider, session_dirs):
    for bad in ("@native-variant:", "@native-variant:not-base64!", "@native-variant:e30"):
        body = _field_error(api.post("/api/v1/sessions", {
            "runtime": "codex", "provider": "scripted", "model": bad}, format="json"),
            "model")
        assert body["code"] == "invalid_model" and "native-variant" in body["message"]
    assert not Session.objects.exists()
    ref = catalog.native_variant_ref("gpt-5.5", "gpt-5.5-fast")
    created = api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                            "model": ref}, format="json")
    assert created.status_code == 201, created.content
    session = Session.objects.get()
    assert session.snapshot["model"] == ref  # kept as given
    assert services.runtime_config(session).model == "gpt-5.5"  # restored at launch


# ------------------------------------------------------------------------ watchdog limits
def test_global_watchdog_settings_round_trip_and_ranges(api):
    shown = api.get("/api/v1/settings/watchdog").json()
    assert shown["turn_hard_cap_seconds"] is None
    assert shown["defaults"]["turn_hard_cap_seconds"] == 21600
    assert shown["maximums"]["repeat_tool_call_limit"] == 1000
    put = api.put("/api/v1/settings/watchdog/", {"turn_hard_cap_seconds": 3600,
                                                 "repeat_tool_call_limit": 0}, format="json")
    assert put.status_code == 200, put.content
    patched = api.patch("/api/v1/settings/watchdog", {"tool_idle_timeout_seconds": 120},
                        format="json").json()
    assert (patched["turn_hard_cap_seconds"], patched["repeat_tool_call_limit"],
            patched["tool_idle_timeout_seconds"]) == (3600, 0, 120)
    for body, field in [({"turn_hard_cap_seconds": 7 * 24 * 3600 + 1}, "turn_hard_cap_seconds"),
                        ({"repeat_tool_call_limit": 1001}, "repeat_tool_call_limit"),
                        ({"turn_idle_timeout_seconds": "soon"}, "turn_idle_timeout_seconds"),
                        ({"tool_idle_seconds": 5}, "tool_idle_seconds")]:
        _field_error(api.patch("/api/v1/settings/watchdog", body, format="json"), field)
    assert WatchdogSettings.current().limits == {"turn_hard_cap_seconds": 3600,
                                                 "repeat_tool_call_limit": 0,
                                                 "tool_idle_timeout_seconds": 120}
    cleared = api.put("/api/v1/settings/watchdog", {}, format="json").json()
    assert cleared["turn_hard_cap_seconds"] is None


def test_provider_watchdog_is_checked(api, openai_provider):
    _field_error(api.patch("/api/v1/providers/scripted", {
        "watchdog": {"repeat_tool_call_limit": 5000}}, format="json"),
        "watchdog.repeat_tool_call_limit")
    saved = api.patch("/api/v1/providers/scripted", {
        "watchdog": {"repeat_tool_call_limit": 3, "turn_hard_cap_seconds": None}},
        format="json")
    assert saved.json()["watchdog"] == {"repeat_tool_call_limit": 3}


def test_a_session_freezes_session_over_provider_over_global(api, openai_provider,
                                                             session_dirs):
    api.put("/api/v1/settings/watchdog", {"turn_hard_cap_seconds": 3600,
                                          "repeat_tool_call_limit": 40,
                                          "turn_idle_timeout_seconds": 900}, format="json")
    api.patch("/api/v1/providers/scripted", {"watchdog": {"repeat_tool_call_limit": 7,
                                                          "turn_hard_cap_seconds": 7200}},
              format="json")
    created = api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                            "model": "gpt-5.5",
                                            "watchdog": {"turn_hard_cap_seconds": 60}},
                       format="json").json()
    assert created["snapshot"]["watchdog"] == {
        "turn_hard_cap_seconds": 60, "repeat_tool_call_limit": 7,
        "turn_idle_timeout_seconds": 900, "tool_idle_timeout_seconds": 1800}
    assert created["snapshot"]["watchdog_sources"] == {
        "turn_hard_cap_seconds": "session", "repeat_tool_call_limit": "provider",
        "turn_idle_timeout_seconds": "global", "tool_idle_timeout_seconds": "default"}
    # frozen: later settings do not change an existing session
    api.put("/api/v1/settings/watchdog", {"turn_idle_timeout_seconds": 60}, format="json")
    session = Session.objects.get(pk=created["id"])
    assert services.runtime_config(session).watchdog.turn_idle_timeout_seconds == 900


@pytest.mark.parametrize("limits, field", [
    ({"turn_hard_cap_seconds": 604801}, "watchdog.turn_hard_cap_seconds"),
    ({"repeat_tool_call_limit": 1001}, "watchdog.repeat_tool_call_limit"),
    ({"tool_idle_timeout_seconds": 1.5}, "watchdog.tool_idle_timeout_seconds"),
])
def test_a_session_limit_out_of_range_is_refused(api, openai_provider, session_dirs, limits,
                                                 field):
    _field_error(api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                               "model": "gpt-5.5", "watchdog": limits},
                          format="json"), field)
    assert not Session.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_providers_repeat_limit_reaches_the_host(openai_provider, session_dirs,
                                                     model_server):
    openai_provider.watchdog = {"repeat_tool_call_limit": 3}
    openai_provider.save()
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)
    model_server.script(*[ToolCall("echo again >> loop.txt") for _ in range(10)])
    services.post_message(session.pk, "loop")
    assert run_host(session.pk) == "slept"
    terminal = TimelineEvent.objects.get(session=session, type="turn.failed")
    assert terminal.payload["code"] == "repeat_tool_loop"
    assert "3 times" in terminal.payload["message"]
    assert TimelineEvent.objects.filter(session=session, type="tool.started").count() in (3, 4)
