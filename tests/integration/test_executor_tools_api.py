"""The executor's tools over REST: /api/v1/tools/… with the assignment's bearer token."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from effects.models import Effect
from tests import factories as f
from tickets import read
from tickets.actions import commands as ticket_commands
from tickets.actions import executor, routing
from tickets.models import Assignment, Input, Question, Report

pytestmark = pytest.mark.django_db


def _open(source, number: int, title: str):
    trigger = f.TriggerFactory(
        source=source, thread__key=f"octo/app#{number}", thread__title=title,
        thread__url=f"https://github.com/octo/app/issues/{number}",
        external_id=f"comment-{number}", text=f"@amux please fix #{number}",
        policy_version="v1hash",
    )
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title=title)
    assignment = Assignment.objects.get(ticket=ticket)
    token = executor.issue_assignment_token(assignment_id=assignment.pk)
    return ticket, assignment, token


@pytest.fixture
def source():
    return f.SourceFactory()


@pytest.fixture
def one(source):
    return _open(source, 1, "Fix the login crash")


@pytest.fixture
def two(source):
    return _open(source, 2, "Speed up the search")


def client(token: str | None = None, scheme: str = "Bearer") -> APIClient:
    api = APIClient()
    if token is not None:
        api.credentials(HTTP_AUTHORIZATION=f"{scheme} {token}")
    return api


def _comment(ticket, number: int, text: str):
    """A later message on the ticket's thread (path B): it becomes an input."""
    trigger = f.TriggerFactory(
        thread=ticket.thread, external_id=f"later-{number}", actor="colleague", text=text,
        addressed=False, decision="inferred", rule="", policy_version="v1hash",
    )
    routing.route_trigger(trigger_id=trigger.pk)
    return trigger


def test_report_lands_on_the_tokens_ticket(one, two):
    ticket, assignment, token = one
    response = client(token).post("/api/v1/tools/report/", {"status": "progress",
                                                             "text": "tests written"},
                                  format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    report = Report.objects.get(pk=body["report"])
    assert (report.ticket_id, report.assignment_id, report.status, report.text) == (
        ticket.pk, assignment.pk, "progress", "tests written"
    )
    assert body["ticket"] == ticket.pk and body["stage"] == "queued"
    assert not Report.objects.filter(ticket=two[0]).exists()
    # progress is not relayed to the thread
    assert not Effect.objects.filter(kind="relay").exists()


def test_a_blocked_report_is_relayed_to_the_thread(one):
    ticket, _assignment, token = one
    response = client(token).post("/api/v1/tools/report", {"status": "blocked",
                                                            "text": "CI has no access"},
                                  format="json")
    assert response.status_code == 201
    assert response.json()["stage"] == "blocked"
    relay = Effect.objects.get(kind="relay")
    assert relay.payload["ticket"] == ticket.pk and relay.payload["text"] == "CI has no access"


def test_report_with_an_unknown_status_is_refused_naming_the_field(one):
    ticket, _assignment, token = one
    response = client(token).post("/api/v1/tools/report/", {"status": "finished", "text": "x"},
                                  format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and "status" in error["fields"]
    assert "progress, done, blocked, failed" in error["message"]
    assert not Report.objects.exists()
    missing = client(token).post("/api/v1/tools/report/", {"text": "x"}, format="json")
    assert missing.status_code == 400 and "status" in missing.json()["error"]["fields"]


def test_ask_records_a_structured_question_and_waits_for_a_person(one):
    ticket, _assignment, token = one
    item = _comment(ticket, 7, "could you also support SSO?")
    response = client(token).post(
        "/api/v1/tools/ask/",
        {"question": "Which branch?", "options": ["main", "release"],
         "message_ref": f"input:{Input.objects.get(trigger=item).pk}"},
        format="json",
    )
    assert response.status_code == 201, response.content
    question = Question.objects.get(pk=response.json()["question"])
    assert question.ticket_id == ticket.pk and question.options == ["main", "release"]
    assert question.message_ref.startswith("input:") and not question.multi
    assert response.json()["stage"] == "waiting_for_person"
    relay = Effect.objects.get(kind="relay", key__contains="question")
    assert "Which branch?" in relay.payload["text"] and "- release" in relay.payload["text"]


def test_ask_without_a_question_is_refused_naming_the_field(one):
    _ticket, _assignment, token = one
    for body in ({}, {"question": "   "}, {"question": "ok?", "options": ["a", ""]},
                 {"question": "ok?", "multi": True}, {"question": "ok?", "options": "a,b"}):
        response = client(token).post("/api/v1/tools/ask/", body, format="json")
        assert response.status_code == 400, body
        fields = response.json()["error"]["fields"]
        assert set(fields) & {"question", "options", "multi"}, body
    assert not Question.objects.exists()


def test_ask_cannot_point_at_another_tickets_message(one, two):
    _ticket, _assignment, token = one
    foreign = _comment(two[0], 8, "hello")
    foreign_input = Input.objects.get(trigger=foreign)
    response = client(token).post(
        "/api/v1/tools/ask/", {"question": "What?", "message_ref": f"input:{foreign_input.pk}"},
        format="json",
    )
    assert response.status_code == 400 and "message_ref" in response.json()["error"]["fields"]
    assert not Question.objects.exists()


def test_hand_back_a_message_outside_the_mandate(one):
    ticket, _assignment, token = one
    item = _comment(ticket, 9, "also rewrite the docs site please")
    response = client(token).post(
        "/api/v1/tools/hand_back/", {"trigger": item.pk, "reason": "docs are another job"},
        format="json",
    )
    assert response.status_code == 200, response.content
    item.refresh_from_db()
    assert item.disposition == "handed_back" and item.reason == "docs are another job"
    assert response.json() == {"trigger": item.pk, "ticket": ticket.pk,
                               "disposition": "handed_back"}


def test_hand_back_bad_input_names_the_field(one):
    _ticket, _assignment, token = one
    bad_trigger = client(token).post("/api/v1/tools/hand_back/", {"trigger": "x", "reason": "r"},
                                     format="json")
    assert bad_trigger.status_code == 400 and "trigger" in bad_trigger.json()["error"]["fields"]
    no_reason = client(token).post("/api/v1/tools/hand-back/", {"trigger": 1}, format="json")
    assert no_reason.status_code == 400 and "reason" in no_reason.json()["error"]["fields"]


def test_reply_posts_on_the_thread_through_the_outbox(one):
    ticket, _assignment, token = one
    response = client(token).post("/api/v1/tools/reply/", {"text": "On it."}, format="json")
    assert response.status_code == 202
    relay = Effect.objects.get(kind="relay")
    assert relay.payload == {"ticket": ticket.pk, "thread": ticket.thread_id, "text": "On it.",
                             "message_id": relay.payload["message_id"]}
    assert relay.payload["message_id"].startswith(f"reply-{_assignment.pk}-")
    # The same reply asked again (its first answer lost to a crash) is the same message.
    again = client(token).post("/api/v1/tools/reply/", {"text": "On it."}, format="json")
    assert again.status_code == 202
    assert list(Effect.objects.filter(kind="relay").values_list("pk", "payload")) == [
        (relay.pk, relay.payload)]
    empty = client(token).post("/api/v1/tools/reply/", {"text": ""}, format="json")
    assert empty.status_code == 400 and "text" in empty.json()["error"]["fields"]
    assert Effect.objects.filter(kind="relay").count() == 1


def test_context_shows_the_task(one):
    ticket, assignment, token = one
    item = _comment(ticket, 10, "it also crashes on logout")
    response = client(token).get("/api/v1/tools/context")
    assert response.status_code == 200
    ctx = response.json()
    assert ctx["ticket"]["id"] == ticket.pk and ctx["ticket"]["title"] == "Fix the login crash"
    assert ctx["assignment"]["id"] == assignment.pk
    assert ctx["mandate"]["requester"] == "octocat" and ctx["mandate"]["strength"] == "explicit"
    assert ctx["request"]["text"] == "@amux please fix #1"
    assert ctx["thread"]["key"] == "octo/app#1"
    assert [i["trigger"] for i in ctx["pending_inputs"]] == [item.pk]
    assert client(token).get("/api/v1/tools/whoami/").json()["ticket"]["id"] == ticket.pk


def test_no_or_unknown_token_is_401(one):
    assert client().post("/api/v1/tools/report/", {"status": "done"}, format="json"
                         ).status_code == 401
    unknown = client("amx_not-a-real-token").post("/api/v1/tools/report/", {"status": "done"},
                                                  format="json")
    assert unknown.status_code == 401
    assert unknown.json()["error"]["code"] in ("authentication_failed", "not_authenticated")
    assert client("amx_nope").get("/api/v1/tools/context/").status_code == 401
    assert not Report.objects.exists()


def test_a_replaced_token_no_longer_works(one):
    _ticket, assignment, token = one
    executor.issue_assignment_token(assignment_id=assignment.pk)  # re-dispatch
    assert client(token).get("/api/v1/tools/context/").status_code == 401


def test_an_ended_assignments_token_is_403(one):
    _ticket, assignment, token = one
    executor.assignment_ended(assignment_id=assignment.pk, reason="turn ended")
    response = client(token).post("/api/v1/tools/report/", {"status": "done"}, format="json")
    assert response.status_code == 403
    assert "ended" in response.json()["error"]["message"]
    assert not Report.objects.exists()


def test_a_token_can_do_nothing_to_another_assignment(one, two):
    ticket_one, assignment_one, token_one = one
    ticket_two, assignment_two, token_two = two
    named = client(token_one).post(
        "/api/v1/tools/report/", {"status": "done", "assignment": assignment_two.pk},
        format="json",
    )
    assert named.status_code == 403
    assert client(token_one).get(f"/api/v1/tools/context/?assignment={assignment_two.pk}"
                                 ).status_code == 403
    # hand back a message that ticket two received: not this ticket's to hand back
    foreign = _comment(ticket_two, 11, "do more")
    handed = client(token_one).post("/api/v1/tools/hand_back/",
                                    {"trigger": foreign.pk, "reason": "not mine"}, format="json")
    assert handed.status_code == 404
    foreign.refresh_from_db()
    assert foreign.disposition != "handed_back"
    assert not Report.objects.exists()
    # each token acts on its own ticket only
    client(token_two).post("/api/v1/tools/report/", {"status": "progress"}, format="json")
    own = client(token_one).post("/api/v1/tools/report/",
                                 {"status": "done", "assignment": assignment_one.pk},
                                 format="json")
    assert own.status_code == 201
    assert list(Report.objects.values_list("ticket_id", "status").order_by("id")) == [
        (ticket_two.pk, "progress"), (ticket_one.pk, "done")
    ]
    assert client(token_two).get("/api/v1/tools/context/").json()["ticket"]["id"] == ticket_two.pk


def test_operator_credentials_do_not_open_the_tools(one, api, operator):
    response = api.post("/api/v1/tools/report/", {"status": "done"}, format="json")
    assert response.status_code == 401
    session = APIClient()
    session.force_login(operator)
    assert session.post("/api/v1/tools/report/", {"status": "done"}, format="json"
                        ).status_code == 401
    assert not Report.objects.exists()


def test_an_assignment_token_does_not_open_operator_endpoints(one):
    ticket, _assignment, token = one
    assert client(token).get("/api/v1/tickets/").status_code == 401
    assert client(token, scheme="Token").get("/api/v1/tickets/").status_code == 401
    assert client(token).post(f"/api/v1/tickets/{ticket.pk}/stop/").status_code == 401
    ticket.refresh_from_db()
    assert ticket.ended_at is None


def test_asking_on_an_ended_ticket_is_refused_but_a_report_is_recorded(one):
    ticket, _assignment, token = one
    ticket_commands.stop_ticket(ticket_id=ticket.pk, by="operator")
    assert read.assignment_for_token(token) is not None  # the stop is still on its way
    asked = client(token).post("/api/v1/tools/ask/", {"question": "still there?"}, format="json")
    assert asked.status_code == 409 and asked.json()["error"]["code"] == "ticket_ended"
    assert client(token).post("/api/v1/tools/report/", {"status": "failed", "text": "stopped"},
                              format="json").status_code == 201


def test_a_malformed_body_is_400_not_500(one):
    _ticket, _assignment, token = one
    api = client(token)
    bad_json = api.post("/api/v1/tools/report/", "{not json", content_type="application/json")
    assert bad_json.status_code == 400
    a_list = api.post("/api/v1/tools/report/", ["done"], format="json")
    assert a_list.status_code == 400
    assert not Report.objects.exists()


def test_mcp_without_the_asgi_lifespan_answers_503_not_500():
    import asyncio

    from amux_site.mcp import McpApp

    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    scope = {"type": "http", "path": "/mcp/", "method": "POST", "headers": []}
    asyncio.run(McpApp()(scope, receive, send))
    assert sent[0]["status"] == 503
    assert b"lifespan" in sent[1]["body"]


def test_the_amux_command_finds_the_api_root(monkeypatch):
    from tickets.tools import amux_cli

    for given in ("http://h:8000", "http://h:8000/", "http://h:8000/api/v1/"):
        monkeypatch.setenv("AMUX_API_URL", given)
        assert amux_cli.api_root() == "http://h:8000/api/v1"
    monkeypatch.setenv("AMUX_API_URL", "h:8000")
    with pytest.raises(amux_cli.Failure) as failure:
        amux_cli.api_root()
    assert failure.value.code == 2
