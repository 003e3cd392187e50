"""Connectors and ingress: explicit agent binding, capabilities per source kind, one Lark
Bot per agent, one receipt per event, fallback never delivering twice, the session queue's
order, bounds, expiry, cancellation, dead letters and rebind, and the inbox's content-free
urgency."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from effects import outbox
from goals import ingress
from goals.core import ingress as rules
from goals.models import Connector, IngressReceipt, QueuedIngress
from runtimes import events as rt
from sessions import services, timeline
from sessions.models import Turn
from tests.integration.goals.conftest import add_agent, start

pytestmark = pytest.mark.django_db


def _connector(api, **body):
    data = {"goal": "ship", "source_kind": "lark_group_message", "source": "team-lark",
            "source_ref": "oc_group_a", "ingress_mode": "live_steering", **body}
    return api.post("/api/v1/connectors/", data)


def _event(key, text="please look", kind="mention", addressed=True, place="oc_group_a",
           **extra):
    return ingress.Event(dedupe_key=key, kind=kind, text=text, actor="ou_private_author",
                         addressed=addressed, thread="omt_private_thread",
                         at=timezone.now(), place=place, **extra)


def _complete(session_id):
    """What a host does with the turn it serves: start it and record its terminal event."""
    turn = Turn.objects.filter(session_id=session_id, state="queued").order_by("seq").first()
    timeline.start_turn(session_id, turn.pk)
    timeline.record(session_id, turn.pk, [rt.TurnCompleted()])


def _inputs(session_id):
    return [t.input.get("text") for t in Turn.objects.filter(session_id=session_id)
            .order_by("seq")]


def test_connector_requires_agent_when_goal_has_several(api, goal, lark_source):
    add_agent(api, "one")
    only = _connector(api)
    assert only.status_code == 201 and only.json()["agent"] == "one"  # one agent: explicit
    add_agent(api, "two")
    refused = _connector(api, source_ref="oc_group_b")
    assert refused.status_code == 400 and "agent" in refused.json()["error"]["fields"]
    named = _connector(api, agent="two", source_ref="oc_group_b")
    assert named.status_code == 201 and named.json()["agent"] == "two"
    assert api.post("/api/v1/connectors/", {"goal": "ship", "agent": "nobody",
                                            "source_kind": "web_chat",
                                            "ingress_mode": "live_steering"}
                    ).status_code == 400


def test_capabilities_refuse_what_the_kind_cannot_do_naming_the_field(api, goal, lark_source):
    add_agent(api, "one")
    cases = [({"source_kind": "web_chat", "reply_mode": "source_thread"}, "reply_mode"),
             ({"source_kind": "lark_document_comment", "ingress_mode": "session_queue",
               "source_ref": "doxcnA"}, "ingress_mode"),
             ({"reply_mode": "source_comment"}, "reply_mode"),
             ({"ingress_mode": "async_inbox", "fallback": "session_queue"}, "fallback"),
             ({"fallback": "live_steering"}, "fallback"),
             ({"capture_scope": "everything"}, "capture_scope"),
             ({"source_ref": ""}, "source_ref"),
             ({"source": "nope"}, "source"),
             ({"provider_kind": "github"}, "provider_kind")]
    for body, field in cases:
        response = _connector(api, **body)
        assert response.status_code == 400, (body, response.content)
        assert field in response.json()["error"]["fields"], (body, response.json())
    assert not Connector.objects.exists()
    ok = _connector(api, capture_scope="configured_chat_all", reply_mode="source_thread",
                    fallback="async_inbox").json()
    assert "thread_reply" in ok["capabilities"] and "comment_reply" not in ok["capabilities"]
    assert ok["state"] == "listening" and ok["label"] == "Lark Bot · listening"
    scopes = {p["capability"]: p for p in ok["permission_requirements"]}
    assert scopes["live_delivery_all"]["scopes"] == ["im:message.group_msg"]
    assert scopes["thread_reply"]["repair_url"] == \
        "https://open.feishu.cn/app/cli_test_app/auth"
    doc = _connector(api, source_kind="lark_document_comment", source_ref="doxcnA",
                     ingress_mode="async_inbox", reply_mode="source_comment").json()
    assert "incremental_listing" in doc["capabilities"]
    assert "live_delivery" not in doc["capabilities"]


def test_one_active_lark_bot_per_agent(api, goal, lark_source):
    add_agent(api, "one")
    first = _connector(api).json()
    second = _connector(api, source_ref="oc_group_b")
    assert second.status_code == 409 and second.json()["error"]["code"] == "lark_bot_exists"
    # a document-comment source is not a bot connection: it binds beside it
    assert _connector(api, source_kind="lark_document_comment", source_ref="doxcnA",
                      ingress_mode="async_inbox").status_code == 201
    assert api.delete(f"/api/v1/connectors/{first['id']}/").json()["state"] == "disconnected"
    assert _connector(api, source_ref="oc_group_b").status_code == 201


def test_a_lark_bot_listens_on_a_configured_chat_no_other_bot_holds(api, goal, lark_source):
    add_agent(api, "one")
    add_agent(api, "two")
    stranger = _connector(api, agent="one", source_ref="oc_stranger")
    assert stranger.status_code == 400 and "source_ref" in stranger.json()["error"]["fields"]
    assert "configured groups" in stranger.json()["error"]["message"]
    first = _connector(api, agent="one").json()
    bound = _connector(api, agent="two")  # the same chat: one message, two agents
    assert bound.status_code == 409 and bound.json()["error"]["code"] == "channel_bound"
    assert list(bound.json()["error"]["fields"]) == ["source_ref"]
    api.delete(f"/api/v1/connectors/{first['id']}/")
    second = _connector(api, agent="two").json()
    assert second["state"] == "listening"
    # the first one cannot come back onto the chat the second now holds
    again = api.post(f"/api/v1/connectors/{first['id']}/reconnect/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "channel_bound"
    assert Connector.objects.get(pk=first["id"]).state == "disconnected"
    # nor onto a chat the source no longer lists
    api.delete(f"/api/v1/connectors/{second['id']}/")
    lark_source.config = dict(lark_source.config, groups=["oc_group_b"])
    lark_source.save()
    gone = api.post(f"/api/v1/connectors/{first['id']}/reconnect/")
    assert gone.status_code == 400 and "source_ref" in gone.json()["error"]["fields"]


def test_two_agents_each_receive_only_their_own_lark_messages(api, pi_agent, lark_source,
                                                              openai_provider):
    add_agent(api, "reviewer", provider="scripted", model="scripted-model")
    a_session = start(api).json()["session"]
    b_session = start(api, "reviewer").json()["session"]
    a = Connector.objects.get(pk=_connector(api, agent="builder").json()["id"])
    b = Connector.objects.get(pk=_connector(api, agent="reviewer",
                                            source_ref="oc_group_b").json()["id"])
    ingress.accept(a, _event("ev-a", "for the builder"))
    ingress.accept(b, _event("ev-b", "for the reviewer", place="oc_group_b"))
    assert _inputs(a_session) == ["for the builder"]
    assert _inputs(b_session) == ["for the reviewer"]


def test_capture_scope_and_place_decide_admission_with_a_content_free_reason(
        api, pi_agent, lark_source):
    start(api)
    connector = Connector.objects.get(pk=_connector(api).json()["id"])
    ignored = ingress.accept(connector, _event("ev-1", addressed=False, kind="message"))
    assert (ignored.outcome, ignored.reason) == ("ignored", "not_addressed")
    elsewhere = ingress.accept(connector, _event("ev-2", place="oc_other"))
    assert (elsewhere.outcome, elsewhere.reason) == ("ignored", "topic_mismatch")
    assert not Turn.objects.exists()
    listed = api.get(f"/api/v1/ingress-receipts/?connector={connector.pk}").json()
    assert listed["count"] == 2
    assert "please look" not in json.dumps(listed) and "ou_private" not in json.dumps(listed)


def test_live_steering_fails_closed_on_stale_binding(api, pi_agent, lark_source):
    session_id = start(api).json()["session"]
    connector = Connector.objects.get(pk=_connector(api).json()["id"])
    services.archive(session_id)  # the bound session ended: its binding is terminal
    refused = ingress.accept(connector, _event("ev-1"))
    assert (refused.outcome, refused.reason, refused.fallback_used) == \
        ("refused", "session_terminal", False)
    from sessions.models import Session

    Session.objects.filter(pk=session_id).update(lifecycle="sleeping",
                                                 sleep_reason="restart_failed")
    stale = ingress.accept(connector, _event("ev-2"))
    assert (stale.outcome, stale.reason) == ("refused", "session_stale")
    api.post("/api/v1/goals/ship/agents/builder/detach/")
    none = ingress.accept(connector, _event("ev-3"))
    assert (none.outcome, none.reason) == ("refused", "no_session")
    assert not Turn.objects.exists()
    # web chat fails closed the same way, with the receipt named
    web = api.post("/api/v1/goals/ship/agents/builder/messages/", {"text": "hello"})
    assert web.status_code == 409 and web.json()["error"]["code"] == "no_session"


def test_fallback_never_delivers_twice(api, pi_agent, lark_source):
    connector = Connector.objects.get(pk=_connector(api, fallback="async_inbox").json()["id"])
    first = ingress.accept(connector, _event("ev-1"))  # no session: the inbox takes it
    assert (first.outcome, first.selected_mode, first.fallback_used, first.reason) == \
        ("inboxed", "async_inbox", True, "no_session")
    session_id = start(api).json()["session"]
    replay = ingress.accept(connector, _event("ev-1"))  # the same event once the session lives
    assert replay.pk == first.pk and replay.outcome == "inboxed"
    assert IngressReceipt.objects.filter(dedupe_key="ev-1").count() == 1
    assert not Turn.objects.filter(session_id=session_id).exists()
    live = ingress.accept(connector, _event("ev-2"))
    assert (live.outcome, live.fallback_used) == ("delivered", False)
    assert ingress.accept(connector, _event("ev-2")).pk == live.pk
    assert _inputs(session_id) == ["please look"]
    urgency = api.get("/api/v1/goals/ship/agents/builder/inbox/urgency/").json()
    assert urgency["pending"] == 1


def test_web_and_lark_messages_enter_one_ordered_session_with_origin(api, pi_agent,
                                                                     lark_source):
    session_id = start(api).json()["session"]
    lark = Connector.objects.get(pk=_connector(api).json()["id"])
    url = "/api/v1/goals/ship/agents/builder/messages/"
    assert api.post(url, {"text": "web one", "key": "w1"}).status_code == 202
    ingress.accept(lark, _event("l1", "lark two"))
    again = api.post(url, {"text": "web three", "key": "w3"}).json()
    assert api.post(url, {"text": "web three", "key": "w3"}).json()["id"] == again["id"]
    assert _inputs(session_id) == ["web one", "lark two", "web three"]
    origins = [r.origin for r in IngressReceipt.objects.order_by("id")]
    assert [o.get("origin", o["source_kind"]) for o in origins] == \
        ["web", "lark_group_message", "web"]
    assert all(o["via"] == "connector" for o in origins)
    web = Connector.objects.get(source_kind="web_chat")
    assert web.agent.slug == "builder" and web.ingress_mode == "live_steering"


def test_session_queue_orders_bounds_and_expires(api, pi_agent, lark_source, settings):
    session_id = start(api).json()["session"]
    connector = Connector.objects.get(pk=_connector(api, ingress_mode="session_queue",
                                                    capture_scope="configured_chat_all"
                                                    ).json()["id"])
    for n in range(3):
        receipt = ingress.accept(connector, _event(f"q{n}", f"queued {n}", kind="message",
                                                   addressed=False))
        assert receipt.outcome == "queued"
    assert not Turn.objects.exists()  # nothing reaches the session until the outbox runs
    outbox.drain(seconds=10)
    assert _inputs(session_id) == ["queued 0"]  # one at a time: the session is busy now
    outbox.drain(seconds=10)
    assert _inputs(session_id) == ["queued 0"]
    _complete(session_id)
    _due_now()
    outbox.drain(seconds=10)
    assert _inputs(session_id) == ["queued 0", "queued 1"]
    _complete(session_id)
    _due_now()
    outbox.drain(seconds=10)
    assert _inputs(session_id) == ["queued 0", "queued 1", "queued 2"]
    assert set(IngressReceipt.objects.values_list("outcome", flat=True)) == {"delivered"}
    # bounded: a full queue refuses with a receipt reason (backpressure)
    for n in range(rules.QUEUE_MAX):
        ingress.accept(connector, _event(f"b{n}", "more", kind="message"))
    full = ingress.accept(connector, _event("b-over", "one too many", kind="message"))
    assert (full.outcome, full.reason) == ("refused", "queue_full")
    # expiring: an item older than the TTL is not delivered
    QueuedIngress.objects.filter(state="queued").update(
        queued_at=timezone.now() - rules.QUEUE_TTL - timedelta(seconds=1))
    _complete(session_id)
    _due_now()
    outbox.drain(seconds=10)
    assert len(_inputs(session_id)) == 3
    assert IngressReceipt.objects.filter(outcome="expired", reason="expired").count() == \
        rules.QUEUE_MAX


def _due_now():
    from effects.models import Effect

    Effect.objects.filter(kind="goals.queue_dispatch").update(due_at=timezone.now())


def test_queued_item_is_cancelled_and_replaced_session_needs_rebind(api, pi_agent,
                                                                    lark_source):
    first_session = start(api).json()["session"]
    connector = Connector.objects.get(pk=_connector(api, ingress_mode="session_queue"
                                                    ).json()["id"])
    keep = ingress.accept(connector, _event("q-keep", "keep me"))
    drop = ingress.accept(connector, _event("q-drop", "drop me"))
    cancelled = api.post(f"/api/v1/ingress-receipts/{drop.pk}/cancel/").json()
    assert cancelled["outcome"] == "cancelled"
    assert api.post(f"/api/v1/ingress-receipts/{drop.pk}/cancel/").status_code == 409
    # the agent's session is replaced before the queue ran
    api.post("/api/v1/goals/ship/agents/builder/detach/")
    second_session = start(api).json()["session"]
    outbox.drain(seconds=10)
    keep.refresh_from_db()
    assert (keep.outcome, keep.reason) == ("dead_letter", "session_replaced")
    assert not Turn.objects.exists()  # never routed silently to the fresh history
    rebound = api.post(f"/api/v1/connectors/{connector.pk}/rebind/").json()
    assert rebound == {"rebound": 1, "session": second_session}
    outbox.drain(seconds=10)
    assert _inputs(second_session) == ["keep me"] and not _inputs(first_session)
    keep.refresh_from_db()
    assert keep.outcome == "delivered" and keep.session_id == second_session


def test_urgency_projects_no_content(api, pi_agent, lark_source):
    connector = Connector.objects.get(pk=_connector(api, ingress_mode="async_inbox",
                                                    capture_scope="configured_chat_all"
                                                    ).json()["id"])
    url = "/api/v1/goals/ship/agents/builder/inbox/urgency/"
    quiet = api.get(url).json()
    assert quiet == {"pending": 0, "questions": 0, "mentions": 0, "replies": 0,
                     "oldest_age_s": None, "reply_due": False}
    ingress.accept(connector, _event("i1", "SECRET-BODY-ONE", kind="message",
                                     addressed=False))
    assert api.get(url).json()["reply_due"] is False  # an ordinary message asks nothing
    ingress.accept(connector, _event("i2", "SECRET-BODY-TWO?", kind="question"))
    ingress.accept(connector, _event("i3", "SECRET-BODY-THREE", kind="mention"))
    ingress.accept(connector, _event("i4", "SECRET-BODY-FOUR", kind="reply"))
    response = api.get(url)
    body = response.json()
    assert set(body) == {"pending", "questions", "mentions", "replies", "oldest_age_s",
                         "reply_due"}
    assert (body["pending"], body["questions"], body["mentions"], body["replies"],
            body["reply_due"]) == (4, 1, 1, 1, True)
    raw = response.content.decode()
    receipt_ids = IngressReceipt.objects.values_list("id", flat=True)
    for private in ("SECRET-BODY", "ou_private_author", "omt_private_thread", "oc_group_a",
                    "i1", "i2", "team-lark", *[f'"{i}"' for i in receipt_ids]):
        assert private not in raw, private
    assert not Turn.objects.exists()  # collection alone makes no turn


def test_attaching_or_detaching_lark_changes_no_mode_session_or_goal_state(api, pi_agent,
                                                                           lark_source):
    session_id = start(api).json()["session"]
    api.post("/api/v1/goals/ship/todos/", {"title": "a todo"})
    before = (api.get("/api/v1/goals/ship/").json(), api.get("/api/v1/goals/ship/todos/").json())
    connector = _connector(api).json()
    agent = api.get("/api/v1/goals/ship/agents/builder/").json()
    assert (agent["mode"], agent["session"]) == ("managed_agent_runtime", session_id)
    assert agent["connectors"] == [{"id": connector["id"], "label": "Lark Bot",
                                    "state": "listening", "state_reason": None,
                                    "state_since": connector["state_since"],
                                    "detached": False}]
    api.delete(f"/api/v1/connectors/{connector['id']}/")
    agent = api.get("/api/v1/goals/ship/agents/builder/").json()
    assert (agent["mode"], agent["session"]) == ("managed_agent_runtime", session_id)
    after = (api.get("/api/v1/goals/ship/").json(), api.get("/api/v1/goals/ship/todos/").json())
    assert after == before
    assert not Turn.objects.exists()


def test_a_disconnected_connector_refuses_with_a_receipt(api, pi_agent, lark_source):
    start(api)
    connector = _connector(api).json()
    api.delete(f"/api/v1/connectors/{connector['id']}/")
    receipt = ingress.accept(Connector.objects.get(pk=connector["id"]), _event("late"))
    assert (receipt.outcome, receipt.reason) == ("refused", "connector_disconnected")
    assert not Turn.objects.exists()


def test_queue_dispatch_replayed_after_a_crash_delivers_once(api, pi_agent, lark_source):
    """A drainer that dies after the handler committed runs it again: the item is already
    delivered (same transaction as its turn), so the session gets one input."""
    from goals import queue

    session_id = start(api).json()["session"]
    connector = Connector.objects.get(pk=_connector(api, ingress_mode="session_queue"
                                                    ).json()["id"])
    receipt = ingress.accept(connector, _event("q-once", "only once"))
    row = {"item": receipt.queued.pk}
    queue.dispatch(1, row)
    _complete(session_id)
    queue.dispatch(1, row)  # the replay
    assert _inputs(session_id) == ["only once"]
    assert IngressReceipt.objects.get(dedupe_key="q-once").outcome == "delivered"


def test_each_queued_item_is_a_row_in_its_sessions_line(api, pi_agent, lark_source):
    """The queue's order is the outbox's: one ordered row per item, one channel per
    session. A row of the older one-row-per-session shape becomes the items' rows."""
    from effects.models import Effect
    from goals import queue

    session_id = start(api).json()["session"]
    connector = Connector.objects.get(pk=_connector(api, ingress_mode="session_queue"
                                                    ).json()["id"])
    items = [ingress.accept(connector, _event(f"q{n}", f"queued {n}")).queued.pk
             for n in range(2)]
    rows = Effect.objects.filter(kind="goals.queue_dispatch").order_by("id")
    assert [(r.key, r.channel, r.payload) for r in rows] == [
        (f"item:{pk}", f"goals.queue:{session_id}", {"item": pk}) for pk in items]
    rows.delete()
    queue.dispatch(1, {"session": session_id})  # written by a process before the move
    assert [r.key for r in rows.all()] == [f"item:{pk}" for pk in items]
    outbox.drain(seconds=10)
    assert _inputs(session_id) == ["queued 0"]  # the head; the second waits in line


def test_queued_items_before_the_upgrade_get_their_rows(api, pi_agent, lark_source):
    """The data migration: each queued item gets its row in its session's line, in order,
    and the one-row-per-session rows go."""
    import importlib

    from django.apps import apps

    from effects.models import Effect

    migration = importlib.import_module("goals.migrations.0011_queued_ingress_rows")
    session_id = start(api).json()["session"]
    connector = Connector.objects.get(pk=_connector(api, ingress_mode="session_queue"
                                                    ).json()["id"])
    items = [ingress.accept(connector, _event(f"m{n}", f"queued {n}")).queued.pk
             for n in range(2)]
    rows = Effect.objects.filter(kind="goals.queue_dispatch")
    rows.delete()
    outbox.enqueue("goals.queue_dispatch", f"session:{session_id}", {"session": session_id})
    migration.item_rows(apps, None)
    assert [(r.key, r.channel) for r in rows.order_by("id")] == [
        (f"item:{pk}", f"goals.queue:{session_id}") for pk in items]
