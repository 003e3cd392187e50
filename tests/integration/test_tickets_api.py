"""REST tickets/, triggers/, evals/: stage and label, mandate, stop and inputs, errors."""

import pytest

from effects.models import Effect
from tests import factories as f
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import Input

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket():
    trigger = f.TriggerFactory(thread__key="octo/app#12", thread__title="Crash",
                               external_id="c1", text="")
    return ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the crash")


def test_a_ticket_shows_its_stage_label_thread_and_mandate(api, ticket):
    body = api.get("/api/v1/tickets").json()
    assert body["count"] == 1 and body["next"] is None
    (row,) = body["results"]
    assert row["stage"] == "queued" and row["label"] == "Queued for the agent"
    assert row["thread"]["key"] == "octo/app#12" and row["thread"]["source"] == "gh"
    assert row["mandate"]["requester"] == "octocat"
    assert row["mandate"]["rule"] == "gh.comment.addressed"
    assert row["session"] is None
    assert api.get(f"/api/v1/tickets/{ticket.pk}/").json()["id"] == ticket.pk


def test_input_then_stop_then_refusals(api, ticket):
    response = api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {"text": "also logout"},
                        format="json")
    assert response.status_code == 201, response.content
    assert Effect.objects.filter(kind="deliver").count() == 1
    response = api.post(f"/api/v1/tickets/{ticket.pk}/stop")
    assert response.status_code == 200 and response.json()["stage"] == "ended"
    again = api.post(f"/api/v1/tickets/{ticket.pk}/stop/")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "ticket_ended"
    late = api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {"text": "hello"}, format="json")
    assert late.status_code == 409
    assert Input.objects.count() == 1


def test_unknown_tickets_and_bad_bodies_get_clear_errors(api, ticket):
    assert api.post("/api/v1/tickets/999999/stop").status_code == 404
    assert api.post("/api/v1/tickets/abc/stop").status_code == 404
    assert api.get("/api/v1/tickets/abc").status_code == 404
    response = api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {}, format="json")
    assert response.status_code == 400
    assert "text" in response.json()["error"]["fields"]
    blank = api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {"text": "   "}, format="json")
    assert blank.status_code == 400
    assert not Input.objects.exists()


def test_a_viewer_reads_but_cannot_stop(client, viewer, ticket):
    from knox.models import AuthToken

    _, token = AuthToken.objects.create(user=viewer)
    headers = {"HTTP_AUTHORIZATION": f"Token {token}"}
    assert client.get("/api/v1/tickets", **headers).status_code == 200
    response = client.post(f"/api/v1/tickets/{ticket.pk}/stop", **headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_triggers_and_evals_are_listed(api, ticket):
    (row,) = api.get("/api/v1/triggers").json()["results"]
    assert row["decision"] == "explicit" and row["disposition"] == "admitted"
    assert api.get("/api/v1/evals").json()["count"] == 0


def test_the_schema_and_docs_answer(api):
    schema = api.get("/api/v1/schema/")
    assert schema.status_code == 200 and b"/api/v1/tickets/" in schema.content
    assert api.get("/api/v1/docs").status_code == 200


def test_the_ticket_page_groups_and_stops(client, operator, ticket):
    client.force_login(operator)
    page = client.get("/panel/tickets")
    assert page.status_code == 200 and b"Fix the crash" in page.content
    assert b"Queued for the agent" in page.content
    detail = client.get(f"/panel/tickets/{ticket.pk}/")
    assert b"octocat" in detail.content
    client.post(f"/panel/tickets/{ticket.pk}/inputs/", {"text": "ping"})
    assert Input.objects.get().text == "ping"
    client.post(f"/panel/tickets/{ticket.pk}/stop/")
    ticket.refresh_from_db()
    assert ticket.ended_at is not None


def test_agent_settings_are_read_and_changed_through_the_api(api):
    from sessions.models import ProviderProfile

    ProviderProfile.objects.create(slug="local", platform="openai-compat",
                                   base_url="http://127.0.0.1:9/v1")
    body = api.get("/api/v1/settings/agents").json()
    assert body["worker_runtime"] == "codex" and body["triage_provider"] is None
    changed = api.put("/api/v1/settings/agents/", {
        "triage_provider": "local", "triage_model": "m", "worker_runtime": "pi",
        "worker_provider": "local", "worker_model": "m"}, format="json")
    assert changed.status_code == 200 and changed.json()["worker_runtime"] == "pi"
    bad = api.patch("/api/v1/settings/agents", {"worker_provider": "nope"}, format="json")
    assert bad.status_code == 400 and "worker_provider" in bad.json()["error"]["fields"]
    bad = api.patch("/api/v1/settings/agents", {"worker_runtime": "emacs"}, format="json")
    assert bad.status_code == 400
    assert api.get("/api/v1/settings/agents").json()["worker_runtime"] == "pi"


def test_agent_settings_page(client, operator):
    client.force_login(operator)
    assert client.get("/panel/settings/agents").status_code == 200
    response = client.post("/panel/settings/agents/", {"worker_runtime": "pi", "worker_model": ""})
    assert response.status_code == 302
    from tickets.models import AgentSettings

    assert AgentSettings.current().worker_runtime == "pi"


def test_disabled_commands_are_set_in_the_api_and_the_panel_and_named_when_wrong(
        api, client, operator):
    from tickets.models import AgentSettings

    made = api.patch("/api/v1/settings/agents/", {"disabled_commands": ["ssh", "curl"]},
                     format="json")
    assert made.status_code == 200 and made.json()["disabled_commands"] == ["curl", "ssh"]
    bad = api.patch("/api/v1/settings/agents/", {"disabled_commands": ["gh", "lark-cli"]},
                    format="json")
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"] == {
        "disabled_commands": ["amux provides these itself: gh, lark-cli"]}
    bad = api.patch("/api/v1/settings/agents/", {"disabled_commands": ["../sh"]},
                    format="json")
    assert bad.status_code == 400 and "disabled_commands.0" in bad.json()["error"]["fields"]
    assert AgentSettings.current().disabled_commands == ["curl", "ssh"]

    client.force_login(operator)
    page = client.get("/panel/settings/agents/")
    assert "Disabled commands" in page.text and "curl\nssh" in page.text
    refused = client.post("/panel/settings/agents/", {"worker_runtime": "codex",
                                                      "disabled_commands": "wget\namux"})
    assert refused.status_code == 200 and "amux provides these itself: amux" in refused.text
    saved = client.post("/panel/settings/agents/", {"worker_runtime": "codex",
                                                    "disabled_commands": "wget nc\n"})
    assert saved.status_code == 302
    assert AgentSettings.current().disabled_commands == ["nc", "wget"]


def test_an_operator_answers_a_question_on_the_ticket_page(client, operator, ticket):
    from tickets.models import Assignment, Question

    assignment = Assignment.objects.get(ticket=ticket)
    question = executor.question_asked(
        assignment_id=assignment.pk, text="Which flow?", options=["SSO", "password"]
    )
    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket.pk}/")
    assert b"Which flow?" in page.content and b'value="SSO"' in page.content
    client.post(f"/panel/questions/{question.pk}/answer/", {"answer": "SSO"})
    question.refresh_from_db()
    assert question.answer == "SSO" and question.answered_at is not None
    assert Input.objects.get(kind="answer").text.endswith("SSO")
    again = client.post(f"/panel/questions/{question.pk}/answer/", {"custom": "password"},
                        follow=True)
    assert b"already been answered" in again.content
    assert Question.objects.get().answer == "SSO"


def test_a_worker_that_ended_its_turn_without_a_report_is_not_shown_working(api, ticket):
    """Stage facts from the rows: a running assignment whose session ended a turn and has
    none open reads `idle` (it needs a person); with its pull request open, `awaiting_review`;
    with a turn queued again, `working`."""
    from django.utils import timezone

    from sessions.models import Turn
    from tickets.models import Assignment

    session = f.SessionFactory()
    ticket.session = session
    ticket.save(update_fields=["session"])
    Assignment.objects.create(ticket=ticket, state="running", last_turn_at=timezone.now())
    Turn.objects.create(session=session, seq=1, key="t1", state="completed")

    def stage():
        row = api.get(f"/api/v1/tickets/{ticket.pk}/").json()
        return row["stage"], row["label"]

    assert stage() == ("idle", "Agent stopped without a report — tell it what's next")
    Turn.objects.create(session=session, seq=2, key="t2", state="queued")
    assert stage() == ("working", "Agent working")
    Turn.objects.filter(session=session, seq=2).update(state="completed")
    ticket.pr_state = "open"
    ticket.save(update_fields=["pr_state"])
    assert stage() == ("awaiting_review", "Awaiting your review")
