"""Goal fixtures: a goal with agents through the REST API, a provider on the scripted model
server (tests/support/sessions.py)."""

import pytest

from tests.support.sessions import (  # noqa: F401
    model_server,
    openai_provider,
    session_dirs,
)


@pytest.fixture
def goal(api):
    response = api.post("/api/v1/goals/", {"slug": "ship", "title": "Ship the release",
                                           "check_command": "make test",
                                           "quota": {"unit": "turns", "limit": 5}})
    assert response.status_code == 201, response.content
    return response.json()


def add_agent(api, slug, mode="managed_agent_runtime", goal="ship", **extra):
    body = {"slug": slug, "mode": mode, **extra}
    response = api.post(f"/api/v1/goals/{goal}/agents/", body)
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def pi_agent(api, goal, openai_provider, session_dirs):  # noqa: F811
    return add_agent(api, "builder", provider="scripted", model="scripted-model")


def start(api, agent="builder", goal="ship"):
    return api.post(f"/api/v1/goals/{goal}/agents/{agent}/start/")


@pytest.fixture
def lark_source(db):
    from intake.models import Source

    return Source.objects.create(kind="lark", slug="team-lark", name="Team Lark",
                                 config={"domain": "https://open.feishu.cn",
                                         "app_id": "cli_test_app",
                                         "groups": ["oc_group_a", "oc_group_b"]})


@pytest.fixture
def session_id(api, pi_agent):
    """The managed agent `builder`'s working session, started (its idle timeout 1 s)."""
    from sessions.models import Session

    started = api.post("/api/v1/goals/ship/agents/builder/start/")
    assert started.status_code == 201, started.content
    sid = started.json()["session"]
    Session.objects.filter(pk=sid).update(idle_timeout_s=1)
    return sid
