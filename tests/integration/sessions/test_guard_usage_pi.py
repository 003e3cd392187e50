"""A real usage report crossing a small cap (issue 12, item 13): the real Pi runtime runs a
ticket's worker turn against the scripted model server, reports its usage (each model
call's figure, then its own cumulative figure), and the ticket is blocked; raising the cap
lets the held input through to a second real turn."""

from __future__ import annotations

import pytest

from effects import outbox
from intake.models import Source, Thread, Trigger
from sessions.models import Session, Turn, UsageDay
from sessions.usage import cumulative_total
from tests.support.model_server import Text
from tests.support.sessions import run_host
from tickets.actions import commands as ticket_commands
from tickets.models import AgentSettings, Input

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]


def test_pi_usage_crosses_the_ticket_cap(api, openai_provider, session_dirs, model_server):
    agents = AgentSettings.current()
    agents.worker_runtime, agents.worker_model = "pi", "scripted-model"
    agents.worker_provider = openai_provider
    agents.ticket_token_cap = 100  # one scripted model call spends 110
    agents.save()
    # a web chat ticket: its worker's directory starts empty, no repository to clone
    source = Source.objects.create(kind="webchat", slug="desk", name="Desk")
    thread = Thread.objects.create(source=source, key="desk-3", title="Crash")
    trigger = Trigger.objects.create(
        source=source, thread=thread, external_id="c3", scope="direct", actor="octocat",
        addressed=True, text="please fix the crash", decision="explicit",
        strength="explicit", rule="desk.direct.addressed", policy_version="v1")
    ticket = ticket_commands.open_ticket(trigger_id=trigger.pk, title="Fix the crash")
    outbox.drain(seconds=20)
    session = Session.objects.get(name=f"worker-{ticket.pk}")
    Session.objects.filter(pk=session.pk).update(idle_timeout_s=1)

    model_server.script(Text("Looking into it."), Text("Logout checked."))
    assert run_host(session.pk) == "slept"
    session.refresh_from_db()
    spent = cumulative_total(session.usage)
    assert spent == 110  # as Pi reported it
    assert UsageDay.objects.get(session=session).tokens == spent
    body = api.get(f"/api/v1/tickets/{ticket.pk}").json()
    assert (body["stage"], body["label"]) == (
        "blocked", "Blocked — the ticket's token cap (100) is reached")

    item = ticket_commands.add_input(ticket_id=ticket.pk, text="also check logout",
                                     author="octocat")
    outbox.drain(seconds=20)
    item.refresh_from_db()
    assert item.delivered_at is None
    assert item.held == "the ticket's token cap (100) is reached"
    assert Turn.objects.filter(session=session).count() == 1

    assert api.patch("/api/v1/settings/agents", {"ticket_token_cap": 1000},
                     format="json").status_code == 200
    outbox.drain(seconds=20)
    assert Input.objects.get(pk=item.pk).delivered_at is not None
    assert run_host(session.pk) == "slept"
    session.refresh_from_db()
    assert [t.state for t in Turn.objects.filter(session=session)] == ["completed"] * 2
    assert UsageDay.objects.get(session=session).tokens == cumulative_total(session.usage) \
        == 220
    assert api.get(f"/api/v1/tickets/{ticket.pk}").json()["stage"] != "blocked"
