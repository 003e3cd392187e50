"""A live_steering message reaches a real Pi turn: a Lark group event and a web message
through goals' one ingress, served by the real session host and Pi against the scripted
model server, in one native conversation."""

from __future__ import annotations

import pytest
from django.utils import timezone

from goals import ingress
from goals.models import Connector, IngressReceipt
from sessions.models import Session, TimelineEvent
from tests.support.model_server import Text
from tests.support.sessions import run_host

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]


def test_live_steering_message_reaches_a_real_pi_turn(api, pi_agent, lark_source,
                                                      model_server):
    started = api.post("/api/v1/goals/ship/agents/builder/start/").json()
    session_id = started["session"]
    Session.objects.filter(pk=session_id).update(idle_timeout_s=1)
    connector = Connector.objects.get(pk=api.post("/api/v1/connectors/", {
        "goal": "ship", "agent": "builder", "source_kind": "lark_group_message",
        "source": "team-lark", "source_ref": "oc_group_a",
        "ingress_mode": "live_steering"}).json()["id"])
    api.post("/api/v1/goals/ship/todos/", {"title": "cut the release"})
    todos_before = api.get("/api/v1/goals/ship/todos/").json()
    model_server.script(Text("from lark, understood"), Text("from web, understood"))
    lark = ingress.accept(connector, ingress.Event(
        dedupe_key="om_1", kind="mention", text="status of the release?", addressed=True,
        at=timezone.now(), place="oc_group_a"))
    web = api.post("/api/v1/goals/ship/agents/builder/messages/", {"text": "and the notes?"})
    assert lark.outcome == "delivered" and web.status_code == 202
    assert run_host(session_id) == "slept"
    replies = [e.payload["text"] for e in TimelineEvent.objects.filter(
        session_id=session_id, type="message.completed").order_by("seq")]
    assert replies == ["from lark, understood", "from web, understood"]
    completed = TimelineEvent.objects.filter(session_id=session_id,
                                             type="turn.completed").count()
    assert completed == 2
    keys = set(IngressReceipt.objects.values_list("turn_key", flat=True))
    assert keys == {f"ingress-{lark.pk}", f"ingress-{web.json()['id']}"}
    assert Session.objects.get(pk=session_id).native_ref  # one native Pi conversation
    agent = api.get("/api/v1/goals/ship/agents/builder/").json()
    assert (agent["lifecycle"], agent["session"]) == ("ready", session_id)
    # a read-only exchange: no todo transition, no quota spend
    assert api.get("/api/v1/goals/ship/todos/").json() == todos_before
    assert api.get("/api/v1/goals/ship/").json()["quota"]["spent"] == 0
