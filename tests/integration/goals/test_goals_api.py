"""Goals, todos, materials and agents through the REST API: one active working session per
agent (API and database), explicit mode changes, managed start through sessions' create
path with Pi by default, detach removing only the binding."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from goals.models import Agent, WorkingSession
from sessions.models import Session
from tests.integration.goals.conftest import add_agent, start

pytestmark = pytest.mark.django_db


def test_goal_shape_and_bad_quota_names_the_field(api, goal):
    assert goal["quota"] == {"unit": "turns", "limit": 5, "spent": 0}
    assert goal["state"] == "active" and goal["check_command"] == "make test"
    bad = api.post("/api/v1/goals/", {"slug": "x", "title": "X",
                                      "quota": {"unit": "hours", "limit": 1}})
    assert bad.status_code == 400 and "quota.unit" in bad.json()["error"]["fields"]
    assert api.post("/api/v1/goals", {"slug": "ship", "title": "again"}).status_code == 409
    done = api.patch("/api/v1/goals/ship/", {"state": "done"})
    assert done.json()["state"] == "done"
    reopen = api.patch("/api/v1/goals/ship", {"state": "active"})
    assert reopen.status_code == 409 and reopen.json()["error"]["code"] == "invalid_transition"


def test_todo_transitions_are_validated_and_done_needs_evidence(api, goal):
    add_agent(api, "builder")
    todo = api.post("/api/v1/goals/ship/todos/", {"title": "write the notes"}).json()
    assert todo["state"] == "open"
    url = f"/api/v1/goals/ship/todos/{todo['id']}/"
    assert api.patch(url, {"state": "done"}).status_code == 409  # open → done skips a claim
    claimed = api.patch(url, {"state": "claimed", "agent": "builder"}).json()
    assert claimed["claimed_by"] == "builder"
    no_evidence = api.patch(url, {"state": "done"})
    assert no_evidence.status_code == 400 and "evidence" in no_evidence.json()["error"]["fields"]
    done = api.patch(url, {"state": "done", "evidence": "notes merged in #12"}).json()
    assert done["state"] == "done" and done["evidence"] == "notes merged in #12"
    assert api.patch(url, {"state": "open"}).status_code == 409


def test_material_revision_and_freshness_are_kept_apart_from_comments(api, goal):
    first = api.post("/api/v1/goals/ship/materials/", {"key": "design", "body": "v1",
                                                       "source_ref": "doxcnPrivate"}).json()
    assert first["revision"] == 1 and first["fresh"] is True
    assert "source_ref" not in first
    same = api.post("/api/v1/goals/ship/materials", {"key": "design", "body": "v1"}).json()
    assert same["revision"] == 1
    changed = api.post("/api/v1/goals/ship/materials", {"key": "design", "body": "v2"}).json()
    assert changed["revision"] == 2
    from goals.models import IngressReceipt

    assert not IngressReceipt.objects.exists()  # reading a body acknowledges no comment


def test_managed_start_creates_a_real_pi_session(api, pi_agent):
    assert pi_agent["lifecycle"] == "terminal" and pi_agent["session"] is None
    response = start(api)
    assert response.status_code == 201, response.content
    body = response.json()
    session = Session.objects.get(pk=body["session"])
    assert session.runtime == "pi" and session.model == "scripted-model"
    assert session.provider.slug == "scripted"
    assert body["lifecycle"] == "ready" and body["mode"] == "managed_agent_runtime"


def test_one_active_session_per_agent_second_start_409(api, pi_agent):
    assert start(api).status_code == 201
    second = start(api)
    assert second.status_code == 409 and second.json()["error"]["code"] == "session_active"
    assert Session.objects.count() == 1
    # the database holds the same rule, whoever writes
    agent = Agent.objects.get(slug="builder")
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkingSession.objects.create(agent=agent, session=Session.objects.get(),
                                      mode=agent.mode)


def test_start_without_provider_is_a_clear_400(api, goal):
    add_agent(api, "lonely", model="m")
    response = start(api, "lonely")
    assert response.status_code == 400
    assert response.json()["error"]["fields"].keys() == {"provider"}
    assert not Session.objects.exists()


def test_attached_agent_is_not_started(api, goal):
    add_agent(api, "app", mode="attached_app_session")
    response = start(api, "app")
    assert response.status_code == 409 and response.json()["error"]["code"] == "wrong_mode"


def test_mode_change_is_explicit(api, pi_agent):
    start(api)
    url = "/api/v1/goals/ship/agents/builder/mode/"
    refused = api.post(url, {"mode": "attached_app_session"})
    assert refused.status_code == 409 and "mode" in refused.json()["error"]["fields"]
    assert Agent.objects.get(slug="builder").mode == "managed_agent_runtime"
    session_id = api.get("/api/v1/goals/ship/agents/builder/").json()["session"]
    detached = api.post("/api/v1/goals/ship/agents/builder/detach/").json()
    assert detached["session"] is None and detached["mode"] == "managed_agent_runtime"
    # detach removed only the binding: the session and the goal stay
    assert Session.objects.get(pk=session_id).lifecycle != "archived"
    assert api.get("/api/v1/goals/ship/").json()["state"] == "active"
    changed = api.post(url, {"mode": "attached_app_session"}).json()
    assert changed["mode"] == "attached_app_session"
    assert api.post(url, {"mode": "dreaming"}).status_code == 400


def test_start_after_detach_binds_a_new_session(api, pi_agent):
    first = start(api).json()["session"]
    api.post("/api/v1/goals/ship/agents/builder/detach/")
    second = start(api).json()["session"]
    assert first != second
    assert WorkingSession.objects.filter(active=True).count() == 1


def test_numbers_past_the_columns_range_are_refused_by_name(api, goal):
    """Found by the API fuzz: these were database errors (500)."""
    quota = api.post("/api/v1/goals/", {"slug": "big", "title": "Big",
                                        "quota": {"unit": "turns", "limit": 2**31}},
                     format="json")
    assert quota.status_code == 400, quota.content
    assert "quota.limit" in quota.json()["error"]["fields"]
    material = api.post("/api/v1/goals/ship/materials/", {"key": "design", "body": "v1",
                                                          "max_age_s": 2**31}, format="json")
    assert material.status_code == 400, material.content
    assert "max_age_s" in material.json()["error"]["fields"]
    kept = api.post("/api/v1/goals/ship/materials/", {"key": "design", "body": "v1",
                                                      "max_age_s": 2**31 - 1}, format="json")
    assert kept.status_code in (200, 201), kept.content
