"""A failed run is never the end: input, Retry or new agent settings dispatch it again, and
an input that cannot reach a worker says so (issue 11, item 6). Real database, the outbox
drained by the real drainer, the real session layer creating the worker session."""

import pytest

from effects import outbox
from effects.models import Effect
from sessions.models import Session, Turn
from tests import factories as f
from tests.support.git_server import served_github
from tickets.actions import commands as ticket_commands
from tickets.actions import executor, routing
from tickets.models import AgentSettings, Assignment, Input, Ticket

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    with served_github(["octo/app"]) as (api, _git):  # a dispatch clones octo/app
        source = f.SourceFactory(config={"repo": ["octo/app"], "api_url": api.url},
                                 secrets={"webhook_secret": "s", "token": "ghp_test"})
        trigger = f.TriggerFactory(source=source, thread__key="octo/app#12",
                                   thread__title="Crash", external_id="c1")
        yield ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the crash")


@pytest.fixture
def provider():
    # Creating a session does not call the provider; nothing listens on port 9.
    return f.ProviderProfileFactory(slug="local")


def drain():
    outbox.drain(seconds=20)


def fail_first_dispatch(api, ticket):
    drain()
    body = api.get(f"/api/v1/tickets/{ticket.pk}").json()
    assert body["stage"] == "failed", body
    return body


def test_failed_first_dispatch_shows_its_failure_then_new_settings_deliver_it(
        api, ticket, provider):
    body = fail_first_dispatch(api, ticket)
    assert body["label"] == "Failed — agent settings are not filled in"
    failure = body["failure"]
    assert failure["code"] == "settings_missing"
    # the message whole, not cut to 60 characters
    assert failure["message"] == (
        "no worker provider and model are configured (Triage → agent settings)")
    assert failure["at"]
    assert api.get("/api/v1/tickets").json()["results"][0]["failure"] == failure

    response = api.put("/api/v1/settings/agents",
                       {"worker_runtime": "pi", "worker_provider": "local",
                        "worker_model": "m"}, format="json")
    assert response.status_code == 200, response.content
    drain()

    ticket.refresh_from_db()
    session = Session.objects.get(name=f"worker-{ticket.pk}")
    assert ticket.session_id == session.pk
    first, second = Assignment.objects.filter(ticket=ticket).order_by("pk")
    assert first.state == "failed" and second.state == "running" and second.attempt == 2
    (turn,) = Turn.objects.filter(session=session)
    assert "@amux please fix the crash" in turn.input["text"]
    assert "picked up again" in turn.input["text"]
    body = api.get(f"/api/v1/tickets/{ticket.pk}").json()
    assert body["stage"] == "working" and body["failure"] is None
    # Saving the settings again dispatches nothing more: nothing has failed.
    api.patch("/api/v1/settings/agents", {"worker_model": "m2"}, format="json")
    assert not Effect.objects.filter(kind="dispatch").exists()


def test_retry_dispatches_a_failed_ticket_and_refuses_others(api, ticket, provider):
    # Not failed yet (queued): nothing to retry.
    queued = api.post(f"/api/v1/tickets/{ticket.pk}/retry")
    assert queued.status_code == 409
    assert queued.json()["error"]["code"] == "not_failed"
    assert "has not failed" in queued.json()["error"]["message"]
    fail_first_dispatch(api, ticket)

    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    response = api.post(f"/api/v1/tickets/{ticket.pk}/retry/")
    assert response.status_code == 200, response.content
    assert response.json()["stage"] == "queued" and response.json()["failure"] is None
    assert Assignment.objects.filter(ticket=ticket, state="dispatching").count() == 1
    # A second press while the new run is in flight is refused, and adds no run.
    again = api.post(f"/api/v1/tickets/{ticket.pk}/retry")
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_failed"
    drain()
    ticket.refresh_from_db()
    assert ticket.session is not None
    assert Assignment.objects.filter(ticket=ticket).count() == 2

    api.post(f"/api/v1/tickets/{ticket.pk}/stop")
    ended = api.post(f"/api/v1/tickets/{ticket.pk}/retry")
    assert ended.status_code == 409 and ended.json()["error"]["code"] == "ticket_ended"
    missing = api.post("/api/v1/tickets/999999/retry")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_a_viewer_cannot_retry(client, viewer, ticket):
    from knox.models import AuthToken

    drain()
    _, token = AuthToken.objects.create(user=viewer)
    response = client.post(f"/api/v1/tickets/{ticket.pk}/retry",
                           HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 403
    assert Assignment.objects.filter(ticket=ticket).count() == 1


def test_input_to_a_failed_ticket_dispatches_it_again_and_is_delivered(api, ticket, provider):
    fail_first_dispatch(api, ticket)
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    response = api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {"text": "try again please"},
                        format="json")
    assert response.status_code == 201
    assert api.get(f"/api/v1/tickets/{ticket.pk}").json()["stage"] == "queued"
    drain()
    ticket.refresh_from_db()
    item = Input.objects.get(ticket=ticket)
    assert item.delivered_at is not None and not item.failure
    turns = [t.input["text"] for t in Turn.objects.filter(session=ticket.session).order_by("seq")]
    assert len(turns) == 2 and turns[1] == "operator: try again please"
    assert Assignment.objects.filter(ticket=ticket, state="running").count() == 1


def test_a_follow_up_on_the_thread_dispatches_a_failed_ticket_again(ticket, provider):
    drain()
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    follow_up = f.TriggerFactory(thread=ticket.thread, external_id="c2", text="any news?")
    assert routing.route_trigger(trigger_id=follow_up.pk) == "follow_up"
    assert Assignment.objects.filter(ticket=ticket, state="dispatching").exists()
    drain()
    assert Input.objects.get(ticket=ticket).delivered_at is not None


def test_an_undeliverable_input_says_why_and_never_loops(api, ticket, provider):
    fail_first_dispatch(api, ticket)
    # Input to a failed ticket with the settings still missing: the new run fails too, and
    # the input shows as not delivered with the reason (no `deliver` row left waiting).
    api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {"text": "hello?"}, format="json")
    drain()
    assert not Effect.objects.filter(kind__in=["deliver", "dispatch"]).exists()
    item = Input.objects.get(ticket=ticket)
    assert item.delivered_at is None and item.failed_at is not None
    assert "agent settings are not filled in" in item.failure
    assert "no worker provider and model are configured" in item.failure
    body = api.get(f"/api/v1/tickets/{ticket.pk}").json()
    assert body["stage"] == "input_not_delivered"
    assert body["failure"]["code"] == "settings_missing"
    assert Assignment.objects.filter(ticket=ticket).count() == 2  # one new run, not a loop

    # The settings are filled in: the run is dispatched again and the input goes in.
    api.patch("/api/v1/settings/agents", {"worker_runtime": "pi", "worker_provider": "local",
                                          "worker_model": "m"}, format="json")
    drain()
    item.refresh_from_db()
    assert item.delivered_at is not None and not item.failure
    assert api.get(f"/api/v1/tickets/{ticket.pk}").json()["stage"] == "working"


def test_settings_saved_in_the_panel_dispatch_the_failed_ticket_again(api, ticket, provider,
                                                                      operator):
    """The Triage tab's save is the same one action as the API's: the settings and the
    new run of each failed ticket are written together."""
    from django.test import Client
    from django.urls import reverse

    fail_first_dispatch(api, ticket)
    panel = Client()
    panel.force_login(operator)
    saved = panel.post(reverse("panel-agent-settings"), {
        "worker_runtime": "pi", "worker_provider": provider.pk, "worker_model": "m",
        "triage_model": ""}, follow=True)
    assert "1 failed ticket(s) dispatched again" in saved.content.decode()
    assert AgentSettings.current().worker_model == "m"
    assert Assignment.objects.filter(ticket=ticket, state="dispatching").count() == 1


def test_a_deliver_while_the_dispatch_is_in_flight_waits_then_settles(ticket):
    # No drain yet: the first run is still dispatching, the input must wait for it.
    item = ticket_commands.add_input(ticket_id=ticket.pk, text="first", author="operator")
    effect = Effect.objects.get(kind="deliver")
    from tickets.effect_handlers import deliver_input

    with pytest.raises(outbox.Later):
        deliver_input(effect.pk, effect.payload)
    drain()  # the dispatch fails (no settings); the waiting input settles as not delivered
    assert not Effect.objects.filter(kind="deliver").exists()
    item.refresh_from_db()
    assert item.failed_at is not None and "agent settings" in item.failure


def test_a_watchdog_trip_fails_the_run_with_its_message(ticket, provider,
                                                        django_capture_on_commit_callbacks):
    from runtimes.events import TurnFailed
    from sessions import timeline

    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    drain()
    ticket.refresh_from_db()
    # The brief's turn runs and a watchdog ends it: the timeline's terminal event, as the
    # runtime records it, reaches the ticket.
    turn = Turn.objects.get(session_id=ticket.session_id)
    with django_capture_on_commit_callbacks(execute=True):
        timeline.start_turn(ticket.session_id, turn.pk)
        timeline.record(ticket.session_id, turn.pk, [TurnFailed(
            code="turn_idle_timeout", message="watchdog: no event for 600 s")])
    drain()  # the turn-ended fact travels through the outbox
    (row,) = Ticket.objects.filter(pk=ticket.pk)
    from tickets.read import failures, stages

    stage, label = stages([row])[row.pk]
    assert stage == "failed"
    assert label == "Failed — a watchdog stopped a turn that went silent"
    failure = failures([row])[row.pk]
    assert failure.code == "turn_idle_timeout"
    assert failure.message == "watchdog: no event for 600 s"
    # Retry starts a new run in the same session.
    ticket_commands.retry_ticket(ticket_id=ticket.pk)
    drain()
    assert Assignment.objects.filter(ticket=ticket, state="running").count() == 1
    assert Session.objects.count() == 1


def test_an_unknown_runtime_fails_the_run_at_once(ticket, provider):
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "nonesuch", "worker_provider": provider, "worker_model": "m"})
    drain()
    assignment = Assignment.objects.get(ticket=ticket)
    assert assignment.state == "failed" and assignment.failure_code == "unknown_runtime"
    assert not Effect.objects.filter(kind="dispatch").exists()  # not retried for ever


def test_the_panel_shows_the_failure_and_retries(client, operator, viewer, ticket, provider):
    drain()
    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Failed — agent settings are not filled in" in html
    assert "settings_missing" in html and "no worker provider and model" in html
    assert f'action="/panel/tickets/{ticket.pk}/retry/"' in html

    client.force_login(viewer)
    assert client.post(f"/panel/tickets/{ticket.pk}/retry/").status_code == 403
    assert Assignment.objects.filter(ticket=ticket).count() == 1

    client.force_login(operator)
    response = client.post(f"/panel/tickets/{ticket.pk}/retry/")
    assert response.status_code == 302 and response["Location"].endswith(
        f"/panel/tickets/{ticket.pk}/")
    assert Assignment.objects.filter(ticket=ticket).count() == 2
    # Pressed again while the new run is in flight: refused, said on the page.
    client.post(f"/panel/tickets/{ticket.pk}/retry/")
    assert "has not failed" in client.get(f"/panel/tickets/{ticket.pk}/").content.decode()
    assert Assignment.objects.filter(ticket=ticket).count() == 2


def test_the_panel_settings_form_dispatches_failed_tickets_again(client, operator, ticket,
                                                                 provider):
    drain()
    client.force_login(operator)
    response = client.post("/panel/settings/agents/", {
        "worker_runtime": "pi", "worker_provider": provider.pk, "worker_model": "m",
        "triage_model": ""})
    assert response.status_code == 302
    drain()
    ticket.refresh_from_db()
    assert ticket.session is not None
    assert Assignment.objects.filter(ticket=ticket, state="running").count() == 1


def test_an_answer_to_a_failed_runs_question_dispatches_it_again(ticket, provider):
    AgentSettings.objects.update_or_create(pk=1, defaults={
        "worker_runtime": "pi", "worker_provider": provider, "worker_model": "m"})
    drain()
    ticket.refresh_from_db()
    run = Assignment.objects.get(ticket=ticket)
    question = executor.question_asked(assignment_id=run.pk, text="SSO or password?",
                                     options=["SSO", "password"])
    executor.worker_turn_ended(session_id=ticket.session_id, state="failed",
                             error_code="provider_error", error_message="502 Bad Gateway")
    run.refresh_from_db()
    assert run.state == "failed" and run.failure_message == "502 Bad Gateway"
    ticket_commands.answer_question(question_id=question.pk, answer="SSO", by="octocat")
    new_run = Assignment.objects.filter(ticket=ticket).order_by("-pk").first()
    assert new_run.pk != run.pk and new_run.state == "dispatching" and new_run.attempt == 2
    drain()
    answer = Input.objects.get(ticket=ticket, kind="answer")
    assert answer.delivered_at is not None
    new_run.refresh_from_db()
    assert new_run.state == "running"
