"""Guards (issue 12, item 13): a token cap per ticket and per day, from the usage the
runtimes report, and a cap on the messages amux sends per ticket per hour. Reaching one
blocks the ticket with the cap named; held work and messages are kept and released when
the cap resets, is raised, or an operator presses Retry. Real database; the outbox drained
by the real drainer; usage written through the real timeline writer; the clock moved."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from effects import outbox
from effects.models import Effect
from intake.models import OutgoingMessage, Source, Thread, Trigger
from runtimes.events import UsageObserved
from sessions import timeline
from sessions.models import ProviderProfile, Session, Turn, UsageDay
from tickets.actions import commands as ticket_commands
from tickets.actions import executor
from tickets.models import AgentSettings, Assignment, Input, TicketMessage

pytestmark = pytest.mark.django_db

START = datetime(2026, 12, 1, 9, 10, tzinfo=UTC)


class Clock:
    def __init__(self, at):
        self.at = at

    def __call__(self):
        return self.at

    def advance(self, **kwargs):
        self.at += timedelta(**kwargs)


@pytest.fixture
def clock(monkeypatch):
    """Every reader of the time (amux_common.clock, the outbox, auto_now) sees this one."""
    fake = Clock(START)
    monkeypatch.setattr(timezone, "now", fake)
    return fake


@pytest.fixture
def worker_settings(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.WORK_DIR = settings.DATA_DIR / "work"
    # Creating a session does not call the provider; nothing listens on port 9.
    ProviderProfile.objects.create(slug="local", platform="openai-compat",
                                   base_url="http://127.0.0.1:9/v1")
    agents = AgentSettings.current()
    agents.worker_runtime, agents.worker_model = "pi", "m"
    agents.worker_provider = ProviderProfile.objects.get(slug="local")
    agents.save()
    return agents


def open_ticket(number=12, source=None):
    # A web chat ticket by default: its worker gets an empty directory, no clone to serve.
    source = source or Source.objects.get_or_create(
        kind="webchat", slug="desk", defaults={"name": "Desk"})[0]
    thread = Thread.objects.create(source=source, key=f"desk-{number}", title="Crash")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id=f"c{number}", scope="comment",
        actor="octocat", addressed=True, text="@amux please fix the crash",
        decision="explicit", strength="explicit", rule="gh.comment.addressed",
        policy_version="v1",
    )
    return ticket_commands.open_ticket(trigger_id=trigger.pk, title=f"Fix the crash {number}")


def drain():
    outbox.drain(seconds=20)


def report_usage(session: Session, total: int) -> None:
    """What a runtime with its own cumulative figure (Codex, Pi) reports, through the one
    writer of the timeline (as the session host stores its adapter's events)."""
    turn = Turn.objects.filter(session=session).order_by("-seq").first()
    timeline.record(session.pk, turn.pk if turn else None, [UsageObserved(
        last={"total_tokens": 10},
        cumulative={"cumulative_input_tokens": total - 100, "cumulative_output_tokens": 100,
                    "cumulative_total_tokens": total})])


def show(api, ticket):
    return api.get(f"/api/v1/tickets/{ticket.pk}").json()


def test_ticket_token_cap_blocks_new_input_until_the_cap_is_raised(
        api, client, operator, clock, worker_settings):
    worker_settings.ticket_token_cap = 50_000
    worker_settings.save()
    ticket = open_ticket()
    drain()
    ticket.refresh_from_db()
    session = Session.objects.get(name=f"worker-{ticket.pk}")
    assert ticket.session_id == session.pk and show(api, ticket)["stage"] == "working"

    report_usage(session, 30_000)
    assert show(api, ticket)["stage"] == "working"
    report_usage(session, 50_200)  # the runtime's own figure crosses the cap
    assert UsageDay.objects.get(session=session).tokens == 50_200  # never summed twice
    body = show(api, ticket)
    assert body["stage"] == "blocked"
    assert body["label"] == "Blocked — the ticket's token cap (50,000) is reached"

    turns = Turn.objects.filter(session=session).count()
    posted = api.post(f"/api/v1/tickets/{ticket.pk}/inputs", {"text": "also check logout"},
                      format="json")
    assert posted.status_code == 201, posted.content
    drain()
    item = Input.objects.get(pk=posted.json()["id"])
    assert item.delivered_at is None and item.failed_at is None
    assert item.held == "the ticket's token cap (50,000) is reached"
    assert Turn.objects.filter(session=session).count() == turns  # nothing reached it
    held = Effect.objects.get(kind="deliver", key=f"input:{item.pk}")
    assert held.due_at > timezone.now() and held.attempts == 0  # waiting, not failing
    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket.pk}").content.decode()
    assert "Blocked — the ticket&#x27;s token cap (50,000) is reached" in page
    assert "held: the ticket&#x27;s token cap (50,000) is reached" in page

    raised = api.patch("/api/v1/settings/agents", {"ticket_token_cap": 100_000},
                       format="json")
    assert raised.status_code == 200 and raised.json()["ticket_token_cap"] == 100_000
    drain()
    item.refresh_from_db()
    assert item.delivered_at is not None and item.held == ""
    last = Turn.objects.filter(session=session).order_by("-seq").first()
    assert "also check logout" in last.input["text"]
    assert show(api, ticket)["stage"] == "working"


def test_daily_cap_sums_every_session_and_resets_at_midnight(api, clock, worker_settings):
    worker_settings.daily_token_cap = 100_000
    worker_settings.save()
    first, second = open_ticket(1), open_ticket(2)
    drain()
    one = Session.objects.get(name=f"worker-{first.pk}")
    two = Session.objects.get(name=f"worker-{second.pk}")
    clock.at = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    report_usage(one, 70_000)  # yesterday's spend does not count today
    clock.at = START
    report_usage(one, 110_000)  # +40,000 today
    report_usage(two, 59_000)
    assert show(api, first)["stage"] == "working"
    report_usage(two, 60_000)
    for ticket in (first, second):
        assert show(api, ticket)["label"] == \
            "Blocked — the daily token cap (100,000) is reached"
    item = ticket_commands.add_input(ticket_id=second.pk, text="and the docs", author="octocat")
    drain()
    item.refresh_from_db()
    assert item.delivered_at is None and "daily token cap" in item.held

    clock.at = datetime(2026, 12, 2, 0, 0, 1, tzinfo=UTC)  # a new day: the cap resets
    assert show(api, second)["stage"] == "working"
    drain()  # the held delivery was due at midnight
    item.refresh_from_db()
    assert item.delivered_at is not None and item.held == ""


def test_a_new_dispatch_waits_while_a_cap_is_reached_and_retry_lets_it_go(
        api, clock, worker_settings):
    worker_settings.daily_token_cap = 1_000
    worker_settings.save()
    busy = open_ticket(1)
    drain()
    report_usage(Session.objects.get(name=f"worker-{busy.pk}"), 1_500)
    waiting = open_ticket(2)
    drain()
    run = Assignment.objects.get(ticket=waiting)
    assert run.state == "dispatching" and run.held == "the daily token cap (1,000) is reached"
    assert not Session.objects.filter(name=f"worker-{waiting.pk}").exists()
    assert show(api, waiting)["label"] == "Blocked — the daily token cap (1,000) is reached"

    retried = api.post(f"/api/v1/tickets/{waiting.pk}/retry")
    assert retried.status_code == 200, retried.content
    assert retried.json()["stage"] == "queued"  # one more cap's worth for this ticket
    drain()
    run.refresh_from_db()
    assert run.state == "running" and run.held == ""
    assert Session.objects.filter(name=f"worker-{waiting.pk}").exists()
    assert show(api, busy)["stage"] == "blocked"  # Retry waived only that ticket's spend
    # a ticket neither failed nor blocked: Retry is still refused
    again = api.post(f"/api/v1/tickets/{waiting.pk}/retry")
    assert again.status_code == 409


@pytest.fixture
def chat(api):
    response = api.post("/api/v1/sources", {"kind": "webchat", "slug": "chat", "name": "Chat"},
                        format="json")
    assert response.status_code == 201, response.content
    return Source.objects.get(slug="chat")


def reply(token: str, text: str):
    tool = APIClient()
    tool.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = tool.post("/api/v1/tools/reply/", {"text": text}, format="json")
    assert response.status_code == 202, response.content


def test_the_message_over_the_hourly_cap_is_held_shown_and_sent_next_hour(
        api, client, operator, clock, worker_settings, chat):
    worker_settings.messages_per_ticket_hour = 3
    worker_settings.save()
    ticket = open_ticket(7, source=chat)
    drain()
    run = Assignment.objects.get(ticket=ticket)
    token = executor.issue_assignment_token(assignment_id=run.pk)
    for n in range(1, 6):
        reply(token, f"reply {n}")
    drain()
    sent = list(OutgoingMessage.objects.filter(thread_key=ticket.thread.key)
                .values_list("text", flat=True))
    assert sent == ["reply 1", "reply 2", "reply 3"]
    assert TicketMessage.objects.filter(ticket=ticket, released_at__isnull=True).count() == 2
    body = show(api, ticket)
    assert body["stage"] == "blocked"
    assert body["label"] == "Blocked — the hourly message cap (3) is reached; 2 messages held"
    client.force_login(operator)
    page = client.get(f"/panel/tickets/{ticket.pk}").content.decode()
    assert 'id="held-messages"' in page and "reply 4" in page and "reply 5" in page

    # each held message is its outbox row, due when the hour rolls over: nothing sweeps
    held = Effect.objects.filter(kind="relay", key__in=TicketMessage.objects.filter(
        ticket=ticket, released_at__isnull=True).values("key"))
    assert [row.due_at for row in held] == [START.replace(minute=0) + timedelta(hours=1)] * 2
    clock.advance(minutes=30)  # 09:40: the same hour, nothing moves
    drain()
    assert OutgoingMessage.objects.filter(thread_key=ticket.thread.key).count() == 3

    clock.advance(minutes=21)  # 10:01: a new hour, the held ones go first, in order
    reply(token, "reply 6")  # a newer one never overtakes them
    drain()
    sent = list(OutgoingMessage.objects.filter(thread_key=ticket.thread.key)
                .values_list("text", flat=True))
    assert sent == [f"reply {n}" for n in range(1, 7)]
    assert show(api, ticket)["stage"] == "working"
    # one more this hour is held again
    reply(token, "reply 7")
    drain()
    assert show(api, ticket)["label"].startswith("Blocked — the hourly message cap (3)")
    assert OutgoingMessage.objects.filter(thread_key=ticket.thread.key).count() == 6


def test_settings_accept_caps_and_refuse_bad_ones(api):
    body = api.get("/api/v1/settings/agents").json()
    assert (body["ticket_token_cap"], body["daily_token_cap"],
            body["messages_per_ticket_hour"]) == (2_000_000, 20_000_000, 20)
    for bad in ({"daily_token_cap": -1}, {"messages_per_ticket_hour": "many"},
                {"ticket_token_cap": 10**30}):
        response = api.patch("/api/v1/settings/agents", bad, format="json")
        assert response.status_code == 400, response.content
        assert list(bad)[0] in response.json()["error"]["fields"]
    ok = api.patch("/api/v1/settings/agents", {"daily_token_cap": 0}, format="json")
    assert ok.status_code == 200 and ok.json()["daily_token_cap"] == 0  # 0: no cap


def test_the_panel_settings_form_sets_the_caps(client, operator, worker_settings):
    client.force_login(operator)
    page = client.get("/panel/settings/agents/").content.decode()
    assert "Token cap per day (UTC)" in page and "Messages per ticket per hour" in page
    form = {"worker_runtime": "pi", "worker_provider": worker_settings.worker_provider.pk,
            "worker_model": "m", "triage_model": ""}
    bad = client.post("/panel/settings/agents/", {**form, "daily_token_cap": "-5"})
    assert bad.status_code == 200 and "daily_token_cap" in bad.context["form"].errors
    saved = client.post("/panel/settings/agents/", {
        **form, "ticket_token_cap": "1000", "daily_token_cap": "0",
        "messages_per_ticket_hour": "5"})
    assert saved.status_code == 302
    agents = AgentSettings.current()
    assert (agents.ticket_token_cap, agents.daily_token_cap,
            agents.messages_per_ticket_hour) == (1000, 0, 5)
    # a form without the caps (an older page) leaves them as they are
    assert client.post("/panel/settings/agents/", form).status_code == 302
    assert AgentSettings.current().ticket_token_cap == 1000


def test_retry_sends_the_held_messages_at_once(api, clock, worker_settings, chat):
    worker_settings.messages_per_ticket_hour = 1
    worker_settings.save()
    ticket = open_ticket(8, source=chat)
    drain()
    token = executor.issue_assignment_token(
        assignment_id=Assignment.objects.get(ticket=ticket).pk)
    for n in (1, 2, 3):
        reply(token, f"reply {n}")
    drain()
    assert show(api, ticket)["label"] == \
        "Blocked — the hourly message cap (1) is reached; 2 messages held"
    retried = api.post(f"/api/v1/tickets/{ticket.pk}/retry")
    assert retried.status_code == 200 and retried.json()["stage"] == "working"
    drain()
    assert list(OutgoingMessage.objects.filter(thread_key=ticket.thread.key)
                .values_list("text", flat=True)) == ["reply 1", "reply 2", "reply 3"]
    clock.advance(minutes=1)
    reply(token, "reply 4")  # one more this hour: the cap counts from the Retry
    reply(token, "reply 5")
    drain()
    assert OutgoingMessage.objects.filter(thread_key=ticket.thread.key).count() == 4
    assert show(api, ticket)["stage"] == "blocked"


def test_messages_held_before_the_upgrade_get_their_rows(api, clock, worker_settings, chat):
    """Held before held messages were outbox rows (only the ledger kept them): the data
    migration gives each its row, and the next hour sends them in order."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("tickets.migrations.0015_held_messages_in_the_outbox")
    worker_settings.messages_per_ticket_hour = 1
    worker_settings.save()
    ticket = open_ticket(9, source=chat)
    drain()
    token = executor.issue_assignment_token(
        assignment_id=Assignment.objects.get(ticket=ticket).pk)
    for n in (1, 2, 3):
        reply(token, f"reply {n}")
    drain()
    held = TicketMessage.objects.filter(ticket=ticket, released_at__isnull=True)
    Effect.objects.filter(kind="relay", key__in=held.values("key")).delete()  # as before
    migration.held_rows(apps, None)
    migration.held_rows(apps, None)  # run twice: still one row each
    assert Effect.objects.filter(kind="relay", key__in=held.values("key")).count() == 2
    drain()  # due at once, but the hour is full: they wait for the next one
    assert OutgoingMessage.objects.filter(thread_key=ticket.thread.key).count() == 1
    clock.advance(hours=1)
    drain()
    clock.advance(hours=1)
    drain()
    assert list(OutgoingMessage.objects.filter(thread_key=ticket.thread.key)
                .values_list("text", flat=True)) == ["reply 1", "reply 2", "reply 3"]
