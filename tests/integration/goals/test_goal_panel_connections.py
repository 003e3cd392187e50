"""The goal page's connection actions (the header line "Lark Bot · listening"), with the
Django test client: operators disconnect, reconnect and rebind a connection; none of it
changes the agent's mode, working session or the goal's todos; refusals say why on the
page; viewers see no actions and are refused."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from effects import outbox
from goals import ingress
from goals.models import Agent, Connector
from sessions.models import Turn
from tests.integration.goals.conftest import add_agent, start

pytestmark = pytest.mark.django_db

PAGE = "/panel/sessions/goals/ship/"


def _client(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/panel/sessions/goals/")
    return client, client.cookies["csrftoken"].value


def _lark(api, **body) -> Connector:
    data = {"goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
            "source": "team-lark", "source_ref": "oc_group_a",
            "ingress_mode": "live_steering", **body}
    response = api.post("/api/v1/connectors/", data)
    assert response.status_code == 201, response.content
    return Connector.objects.get(pk=response.json()["id"])


def _event(key, text="please look"):
    return ingress.Event(dedupe_key=key, kind="mention", text=text, actor="ou_author",
                         addressed=True, thread="omt_thread", at=timezone.now(),
                         place="oc_group_a")


def _act(client, csrf, connector, action, **extra):
    return client.post(f"{PAGE}connectors/{connector.pk}/{action}/",
                       {"csrfmiddlewaretoken": csrf}, **extra)


def _header(html: str) -> str:
    start = html.index('<p class="connections">')
    return html[start:html.index("</p>", start)]


@pytest.fixture
def lark_goal(api, pi_agent, lark_source):
    api.post("/api/v1/goals/ship/todos/", {"title": "write the release notes"})
    return _lark(api)


def test_an_operator_disconnects_and_reconnects_a_connection_from_its_header(
        operator, api, lark_goal):
    session = start(api).json()["session"]
    before = (api.get("/api/v1/goals/ship/").json(),
              api.get("/api/v1/goals/ship/todos/").json())
    client, csrf = _client(operator)
    header = _header(client.get(PAGE).content.decode())
    assert "Lark Bot · listening" in header
    assert f'data-action="disconnect" data-connector="{lark_goal.pk}"' in header
    assert 'data-action="reconnect"' not in header
    assert 'data-action="rebind"' not in header  # live steering queues nothing

    page = _act(client, csrf, lark_goal, "disconnect", follow=True).content.decode()
    assert "Lark Bot · disconnected." in page  # the notice
    header = _header(page)
    assert "Lark Bot · disconnected" in header and 'data-action="reconnect"' in header
    assert 'data-action="disconnect"' not in header
    lark_goal.refresh_from_db()
    assert lark_goal.state == "disconnected"
    refused = ingress.accept(lark_goal, _event("while-off"))
    assert (refused.outcome, refused.reason) == ("refused", "connector_disconnected")

    page = _act(client, csrf, lark_goal, "reconnect", follow=True).content.decode()
    assert "Lark Bot · listening." in page
    assert "Lark Bot · listening" in _header(page)
    lark_goal.refresh_from_db()
    assert lark_goal.state == "listening"
    # the same settings as before, and nothing else moved
    assert (lark_goal.ingress_mode, lark_goal.capture_scope, lark_goal.source_ref) == (
        "live_steering", "mentions", "oc_group_a")
    agent = api.get("/api/v1/goals/ship/agents/builder/").json()
    assert (agent["mode"], agent["session"]) == ("managed_agent_runtime", session)
    assert (api.get("/api/v1/goals/ship/").json(),
            api.get("/api/v1/goals/ship/todos/").json()) == before
    assert not Turn.objects.exists()
    delivered = ingress.accept(lark_goal, _event("after-reconnect", "back again"))
    assert delivered.outcome == "delivered" and delivered.session_id == session


def test_reconnect_is_refused_while_another_lark_bot_listens_and_says_why(
        operator, api, lark_goal):
    client, csrf = _client(operator)
    _act(client, csrf, lark_goal, "disconnect")
    newer = _lark(api, source_ref="oc_group_b")  # allowed: the first one is disconnected
    page = _act(client, csrf, lark_goal, "reconnect", follow=True).content.decode()
    assert "already has an active Lark Bot connection" in page
    lark_goal.refresh_from_db()
    newer.refresh_from_db()
    assert (lark_goal.state, newer.state) == ("disconnected", "listening")
    # the REST call answers the same refusal, naming the field
    refused = api.post(f"/api/v1/connectors/{lark_goal.pk}/reconnect/")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "lark_bot_exists"
    assert "agent" in refused.json()["error"]["fields"]
    # once the newer one is disconnected, the first one listens again
    api.delete(f"/api/v1/connectors/{newer.pk}/")
    answered = api.post(f"/api/v1/connectors/{lark_goal.pk}/reconnect")  # no slash either
    assert answered.status_code == 200 and answered.json()["state"] == "listening"


def test_reconnect_with_a_disabled_source_is_refused_instead_of_reported_done(
        operator, api, lark_goal, lark_source):
    client, csrf = _client(operator)
    _act(client, csrf, lark_goal, "disconnect")
    lark_source.enabled = False
    lark_source.save(update_fields=["enabled"])
    page = _act(client, csrf, lark_goal, "reconnect", follow=True).content.decode()
    assert "source &#x27;team-lark&#x27; is disabled" in page
    assert "Lark Bot · listening." not in page
    lark_goal.refresh_from_db()
    assert lark_goal.state == "disconnected"
    refused = api.post(f"/api/v1/connectors/{lark_goal.pk}/reconnect/")
    assert refused.status_code == 409 and "source" in refused.json()["error"]["fields"]


def test_rebind_moves_a_replaced_sessions_queue_onto_the_new_session(operator, api, pi_agent,
                                                                     lark_source):
    queueing = _lark(api, ingress_mode="session_queue")
    client, csrf = _client(operator)
    header = _header(client.get(PAGE).content.decode())
    assert f'data-action="rebind" data-connector="{queueing.pk}"' in header
    # no working session yet: the page says so and nothing moves
    page = _act(client, csrf, queueing, "rebind", follow=True).content.decode()
    assert "no active working session to rebind to" in page

    first = start(api).json()["session"]
    kept = ingress.accept(queueing, _event("q-kept", "keep me"))
    assert kept.outcome == "queued"
    # the session is replaced before the queue ran: the item is dead-lettered, not
    # routed silently into the new history
    client.post(f"{PAGE}agents/builder/detach/", {"csrfmiddlewaretoken": csrf})
    client.post(f"{PAGE}agents/builder/start/", {"csrfmiddlewaretoken": csrf})
    second = Agent.objects.get(slug="builder").bindings.get(active=True).session_id
    assert second != first
    outbox.drain(seconds=10)
    kept.refresh_from_db()
    assert (kept.outcome, kept.reason) == ("dead_letter", "session_replaced")
    assert not Turn.objects.exists()

    page = _act(client, csrf, queueing, "rebind", follow=True).content.decode()
    assert f"Lark Bot: 1 queued item moved to session {second}." in page
    outbox.drain(seconds=10)
    kept.refresh_from_db()
    assert (kept.outcome, kept.session_id) == ("delivered", second)
    assert [t.input.get("text") for t in Turn.objects.filter(session_id=second)] == [
        "keep me"]
    assert not Turn.objects.filter(session_id=first).exists()
    # a second rebind finds nothing left to move
    again = _act(client, csrf, queueing, "rebind", follow=True).content.decode()
    assert f"Lark Bot: 0 queued items moved to session {second}." in again
    assert Turn.objects.filter(session_id=second).count() == 1


def test_viewers_see_no_connection_actions_and_are_refused(viewer, api, lark_goal):
    client, csrf = _client(viewer)
    header = _header(client.get(PAGE).content.decode())
    assert "Lark Bot · listening" in header
    assert "data-action" not in header and "<form" not in header
    assert _act(client, csrf, lark_goal, "disconnect").status_code == 403
    lark_goal.refresh_from_db()
    assert lark_goal.state == "listening"


def test_unknown_actions_and_other_goals_connectors_are_not_found(operator, api, lark_goal):
    api.post("/api/v1/goals/", {"slug": "other", "title": "Another goal"})
    add_agent(api, "helper", goal="other", mode="attached_app_session")
    client, csrf = _client(operator)
    assert _act(client, csrf, lark_goal, "explode").status_code == 404
    foreign = client.post(f"/panel/sessions/goals/other/connectors/{lark_goal.pk}/disconnect/",
                          {"csrfmiddlewaretoken": csrf})
    assert foreign.status_code == 404
    assert client.post(f"{PAGE}connectors/999999/disconnect/",
                       {"csrfmiddlewaretoken": csrf}).status_code == 404
    assert client.get(f"{PAGE}connectors/{lark_goal.pk}/disconnect/").status_code == 405
    lark_goal.refresh_from_db()
    assert lark_goal.state == "listening"


def test_a_second_web_chat_is_not_reconnected_beside_the_active_one(operator, api, lark_goal):
    def web_chat():
        response = api.post("/api/v1/connectors/", {"goal": "ship", "agent": "builder",
                                                    "source_kind": "web_chat",
                                                    "ingress_mode": "live_steering"})
        assert response.status_code == 201, response.content
        return Connector.objects.get(pk=response.json()["id"])

    old = web_chat()
    client, csrf = _client(operator)
    _act(client, csrf, old, "disconnect")
    current = web_chat()
    page = _act(client, csrf, old, "reconnect", follow=True).content.decode()
    assert "Web chat: the agent already has an active Web chat connection" in page
    old.refresh_from_db()
    current.refresh_from_db()
    assert (old.state, current.state) == ("disconnected", "connected")
