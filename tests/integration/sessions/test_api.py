"""REST providers/, runtimes/, sessions/: shapes, write-only secrets, refusals that change
nothing."""

from __future__ import annotations

import pytest

from sessions import control, services, timeline
from sessions.models import ProviderProfile, Session, TimelineEvent, Turn
from sessions.new_session import Launch, SessionSpec

pytestmark = pytest.mark.django_db


def test_provider_key_is_write_only_and_encrypted(api):
    response = api.post("/api/v1/providers", {"slug": "gw", "platform": "openai-compat",
                                              "base_url": "http://127.0.0.1:9/v1",
                                              "api_key": "sk-very-secret",
                                              "models": ["m1"]}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert "api_key" not in body and body["secrets"] == {"api_key": True}
    assert b"sk-very-secret" not in api.get("/api/v1/providers/gw").content
    assert ProviderProfile.objects.get(slug="gw").secrets["api_key"] == "sk-very-secret"
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT secrets FROM agent_sessions_providerprofile WHERE slug='gw'")
        assert "sk-very-secret" not in cur.fetchone()[0]


def test_provider_needs_a_known_platform_and_explicit_base_url(api):
    response = api.post("/api/v1/providers/", {"slug": "x", "platform": "mystery",
                                               "base_url": "ftp://nope"}, format="json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) >= {"platform", "base_url"}
    assert not ProviderProfile.objects.exists()


def test_runtimes_report_installed_version_and_capabilities(api):
    response = api.get("/api/v1/runtimes/")
    assert response.status_code == 200
    runtimes = {r["name"]: r for r in response.json()["results"]}
    assert set(runtimes) >= {"codex", "pi", "acp", "claude"}
    assert runtimes["codex"]["installed"] and runtimes["codex"]["version"] == "0.171.0"
    assert runtimes["pi"]["version"] == "0.73.1"
    assert runtimes["codex"]["capabilities"]["resume"] is True
    assert api.get("/api/v1/runtimes/nope").status_code == 404


def test_create_session_defaults_workdir_and_freezes_the_snapshot(api, openai_provider,
                                                                  session_dirs):
    response = api.post("/api/v1/sessions", {"runtime": "codex", "provider": "scripted",
                                             "model": "gpt-5.5"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["lifecycle"] == "created" and body["workdir"].startswith(str(session_dirs))
    assert body["snapshot"]["watchdog"] == {"turn_hard_cap_seconds": 21600,
                                            "turn_idle_timeout_seconds": 1800,
                                            "tool_idle_timeout_seconds": 1800,
                                            "repeat_tool_call_limit": 50}
    assert set(body["snapshot"]["watchdog_sources"].values()) == {"default"}
    assert "sk-test-secret" not in response.content.decode()
    detail = api.get(f"/api/v1/sessions/{body['id']}").json()
    assert detail["usage"] == {} and detail["lifecycle"] == "created"


@pytest.mark.parametrize("data, code", [
    ({"runtime": "nope", "provider": "scripted", "model": "m"}, "unknown_runtime"),
    ({"runtime": "codex", "provider": "nope", "model": "m"}, "unknown_provider"),
    ({"runtime": "claude", "provider": "scripted", "model": "m"}, "provider_unsupported"),
])
def test_bad_sessions_are_refused_before_anything_starts(api, openai_provider, session_dirs,
                                                         data, code):
    response = api.post("/api/v1/sessions/", data, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert not Session.objects.exists()


def test_archived_session_refuses_messages_and_nothing_changes(api, openai_provider,
                                                               session_dirs):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    services.archive(session.pk)
    events = TimelineEvent.objects.count()
    response = api.post(f"/api/v1/sessions/{session.pk}/messages", {"text": "hi"},
                        format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "session_archived"
    assert not Turn.objects.exists() and TimelineEvent.objects.count() == events


def test_interrupt_without_a_turn_in_flight_is_refused(api, openai_provider, session_dirs):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    control.clear(session.pk)
    response = api.post(f"/api/v1/sessions/{session.pk}/interrupt/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "no_turn_in_flight"
    assert control.client().llen(control.key(session.pk)) == 0


def test_empty_message_and_unknown_permission_are_refused(api, openai_provider, session_dirs):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    assert api.post(f"/api/v1/sessions/{session.pk}/messages", {"text": " "},
                    format="json").status_code == 400
    response = api.post(f"/api/v1/sessions/{session.pk}/permissions/nope",
                        {"option": "accept"}, format="json")
    assert response.status_code == 409 and response.json()["error"]["code"] == "not_pending"


def test_message_is_idempotent_on_key_and_timeline_lists_events(api, openai_provider,
                                                                session_dirs):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5"))
    for _ in range(2):
        response = api.post(f"/api/v1/sessions/{session.pk}/messages",
                            {"text": "hello", "key": "k1"}, format="json")
        assert response.status_code == 202
    assert Turn.objects.filter(session=session).count() == 1
    events = api.get(f"/api/v1/sessions/{session.pk}/timeline?after=0").json()
    assert [e["type"] for e in events] == ["session.created", "turn.queued"]
    assert events[1]["turn"] == 1 and events[1]["payload"]["text"] == "hello"
    assert [e["seq"] for e in events] == [1, 2]
    after = api.get(f"/api/v1/sessions/{session.pk}/timeline?after=1").json()
    assert [e["seq"] for e in after] == [2]
    assert api.get(f"/api/v1/sessions/{session.pk}/timeline?after=x").status_code == 400
    assert timeline.last_seq(session.pk) == 2


def test_runtime_env_is_stored_encrypted_and_never_shown(api, openai_provider, session_dirs):
    session = services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                                    model="gpt-5.5",
                                                    env={"AMUX_ASSIGNMENT_TOKEN": "tok-secret"},
                                                    path=["/opt/amux-shim"]))
    config = services.runtime_config(Session.objects.get(pk=session.pk))
    assert config.extra_env == {"AMUX_ASSIGNMENT_TOKEN": "tok-secret"}
    assert config.extra_path == ["/opt/amux-shim"]
    assert config.background_shell_after is None  # only ticket workers move commands away
    # the runtime gets amux's model gateway and a session credential, never the provider's
    # own URL or key (sessions/model_gateway.py)
    assert config.provider.api_key.startswith("amxm_")
    assert config.provider.api_key != "sk-test-secret"
    assert config.provider.base_url.endswith("/gateway/model/openai")
    assert "tok-secret" not in api.get(f"/api/v1/sessions/{session.pk}").content.decode()
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT runtime_env FROM agent_sessions_session WHERE id=%s", [session.pk])
        assert "tok-secret" not in cur.fetchone()[0]


def test_a_workdir_outside_work_is_refused_and_nothing_there_is_touched(
        api, openai_provider, session_dirs, settings, tmp_path,
        django_capture_on_commit_callbacks):
    """linux-dac shares a session's work directory with the runtime user, so a workdir is
    only ever a directory under the data directory's work/: `/etc`, the data directory,
    work/ itself, a `..` and a symbolic link out of it are refused with a 400 naming
    workdir, and the directory named keeps its owner and mode."""
    import json
    import os
    from pathlib import Path

    work = Path(settings.WORK_DIR)
    root_only = tmp_path / "root-only"
    root_only.mkdir(mode=0o700)
    (work / "escape").symlink_to(root_only)
    (work / "file").write_text("not a directory")
    before = root_only.stat()
    refused = {"/etc": "must be a directory under", str(settings.DATA_DIR): "under",
               str(work): "under", str(root_only): "under",
               f"{work}/../root-only": "'..'", f"{work}/escape": f"leads to {root_only}",
               f"{work}/escape/deeper": f"leads to {root_only}/deeper",
               "relative/dir": "absolute", f"{work}/file": "not a directory",
               f"{work}/\udc80": "Surrogate", f"{work}/{'x' * 300}": "File name too long",
               f"{work}/{'/'.join(['x' * 200] * 3)}": "no more than 500"}
    for workdir, says in refused.items():
        body = json.dumps({"runtime": "codex", "provider": "scripted", "model": "gpt-5.5",
                           "workdir": workdir})  # ASCII: a lone surrogate as JSON sends it
        response = api.post("/api/v1/sessions/", body, content_type="application/json")
        assert response.status_code == 400, (workdir, response.content)
        error = response.json()["error"]
        assert error["code"] == "invalid" and list(error["fields"]) == ["workdir"], error
        assert says in error["fields"]["workdir"][0], (workdir, error)
    assert not Session.objects.exists()
    after = root_only.stat()
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        before.st_uid, before.st_gid, before.st_mode)
    assert os.listdir(root_only) == []

    # the service refuses the same for every other caller (a 400 lists all faults at once)
    with pytest.raises(services.CommandError) as caught:
        services.create_session(Launch.direct(runtime="codex", provider="scripted",
                                              model="gpt-5.5"),
                                spec=SessionSpec(workdir="/etc"))
    assert caught.value.field == "workdir"
    response = api.post("/api/v1/sessions/", {"runtime": "codex", "provider": "scripted",
                                              "model": "gpt-5.5", "workdir": "/etc",
                                              "idle_timeout_s": 1}, format="json")
    assert set(response.json()["error"]["fields"]) == {"workdir", "idle_timeout_s"}

    # under work/: accepted, stored with its symbolic links followed
    (work / "projects").mkdir()
    (work / "current").symlink_to(work / "projects")
    with django_capture_on_commit_callbacks(execute=True):  # made once the row commits
        response = api.post("/api/v1/sessions/", {"runtime": "codex", "provider": "scripted",
                                                  "model": "gpt-5.5",
                                                  "workdir": f"{work}/current/app"},
                            format="json")
    assert response.status_code == 201, response.content
    assert response.json()["workdir"] == str((work / "projects" / "app").resolve())
    assert (work / "projects" / "app").is_dir()


def test_an_app_server_workspace_follows_the_workdir_rule(api, openai_provider,
                                                          session_dirs):
    response = api.post("/api/v1/attachable-sessions/", {
        "provider": "scripted", "model": "gpt-5.5", "workspace": "/root"}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert list(error["fields"]) == ["workspace"]
    assert "workspace must be a directory under" in error["fields"]["workspace"][0]


@pytest.mark.parametrize("url, fault", [
    ("http://127.0.0.1:9/", "ws:// or wss://"),
    # a host IDNA cannot encode was a UnicodeError (500), found by the API fuzz
    ("ws://\x84\u00e9:1/", "does not answer"),
])
def test_registering_an_app_server_names_a_url_that_cannot_be_one(api, url, fault):
    response = api.post("/api/v1/attachable-sessions/", {"url": url}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert list(error["fields"]) == ["url"] and fault in error["fields"]["url"][0], error
