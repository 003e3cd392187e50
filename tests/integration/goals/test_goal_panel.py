"""The goal page (Sessions tab → Goals), with the Django test client: it shows the goal,
its agents' mode, lifecycle and working session, each connection's state, todos and inbox
urgency; operators start and detach; viewers read only."""

from __future__ import annotations

import pytest
from django.test import Client

from goals.models import Agent
from sessions.models import Session
from tests.integration.goals.conftest import add_agent

pytestmark = pytest.mark.django_db


def _client(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/panel/sessions/goals/")
    return client, client.cookies["csrftoken"].value


@pytest.fixture
def page_goal(api, pi_agent, lark_source):
    api.post("/api/v1/connectors/", {"goal": "ship", "agent": "builder",
                                     "source_kind": "lark_group_message",
                                     "source": "team-lark", "source_ref": "oc_group_a",
                                     "ingress_mode": "live_steering"})
    api.post("/api/v1/goals/ship/todos/", {"title": "write the release notes"})
    add_agent(api, "app", mode="attached_app_session")


def test_goal_page_renders_agents_connections_todos_and_urgency(operator, page_goal):
    client, csrf = _client(operator)
    listing = client.get("/panel/sessions/goals/")
    assert listing.status_code == 200 and b"Ship the release" in listing.content
    page = client.get("/panel/sessions/goals/ship/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Lark Bot · listening" in html
    assert "write the release notes" in html and "Inbox: 0 pending" in html
    assert "attached app session" in html and "managed (pi, scripted" in html
    assert 'data-action="start"' in html
    started = client.post("/panel/sessions/goals/ship/agents/builder/start/",
                          {"csrfmiddlewaretoken": csrf})
    assert started.status_code == 302
    session = Session.objects.get()
    html = client.get("/panel/sessions/goals/ship/").content.decode()
    assert f'href="/panel/sessions/{session.pk}/"' in html and 'data-action="detach"' in html
    again = client.post("/panel/sessions/goals/ship/agents/builder/start/",
                        {"csrfmiddlewaretoken": csrf}, follow=True)
    assert "already has an active working session" in again.content.decode()
    assert Session.objects.count() == 1
    client.post("/panel/sessions/goals/ship/agents/builder/detach/",
                {"csrfmiddlewaretoken": csrf})
    assert Agent.objects.get(slug="builder").bindings.filter(active=True).count() == 0


def test_viewer_reads_the_goal_page_but_cannot_start(viewer, page_goal):
    client, csrf = _client(viewer)
    page = client.get("/panel/sessions/goals/ship/")
    assert page.status_code == 200 and b"Lark Bot" in page.content
    assert b'data-action="start"' not in page.content
    refused = client.post("/panel/sessions/goals/ship/agents/builder/start/",
                          {"csrfmiddlewaretoken": csrf})
    assert refused.status_code == 403
    assert not Session.objects.exists()


def test_an_operator_runs_the_next_turn_and_switches_autorun(operator, page_goal, api):
    from goals.models import GoalTurn, Todo

    api.patch("/api/v1/goals/ship/", {"check_command": "true"})
    client, csrf = _client(operator)
    client.post("/panel/sessions/goals/ship/agents/builder/start/",
                {"csrfmiddlewaretoken": csrf})
    html = client.get("/panel/sessions/goals/ship/").content.decode()
    assert 'data-action="turn"' in html and 'data-action="autorun-on"' in html
    client.post("/panel/sessions/goals/ship/agents/builder/turn/",
                {"csrfmiddlewaretoken": csrf})
    turn = GoalTurn.objects.get()
    assert turn.key.startswith("panel-") and turn.state == "queued"
    assert Todo.objects.get(pk=turn.todo_id).state == "claimed"
    # one in flight: a second click is refused, and says why
    again = client.post("/panel/sessions/goals/ship/agents/builder/turn/",
                        {"csrfmiddlewaretoken": csrf}, follow=True)
    assert "still in flight" in again.content.decode() and GoalTurn.objects.count() == 1
    assert f'data-turn="{turn.key}"' in again.content.decode()
    client.post("/panel/sessions/goals/ship/agents/builder/autorun-on/",
                {"csrfmiddlewaretoken": csrf})
    assert Agent.objects.get(slug="builder").autorun is True
    html = client.get("/panel/sessions/goals/ship/").content.decode()
    assert 'data-action="autorun-off"' in html
    client.post("/panel/sessions/goals/ship/agents/builder/autorun-off/",
                {"csrfmiddlewaretoken": csrf})
    assert Agent.objects.get(slug="builder").autorun is False
    # an attached agent has neither
    refused = client.post("/panel/sessions/goals/ship/agents/app/autorun-on/",
                          {"csrfmiddlewaretoken": csrf}, follow=True)
    assert "only a managed agent" in refused.content.decode()
    assert Agent.objects.get(slug="app").autorun is False
